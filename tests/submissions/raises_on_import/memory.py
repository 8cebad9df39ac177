raise RuntimeError("this module is broken at import time")
