"""The gloo harness, grader side: starting a group of ranks from a fork
server (group), running a distributed part's scenarios on it (launch)
and the keyed seeds of its data (seeds). What runs inside each rank is in
the `ranks` package."""
