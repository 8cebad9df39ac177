"""The gloo harness, grader side: starting a group of ranks from a fork
server (group.py), running a distributed part's scenarios on it (launch.py)
and the keyed seeds of its data (seeds.py). What runs inside each rank is in
ranks/."""
