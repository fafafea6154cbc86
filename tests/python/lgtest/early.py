"""Imported by the python module's init (ABI 1.2 host->route_at), before any request: its
import says so on the error log (print goes to standard error). The pid is the compute
process's, which the server's log names (lagless.compute_pid: the calls may run in a python3
process that compute process started)."""
import lagless

print("lgtest.early imported in pid %d" % lagless.compute_pid)


def hello(body, request):
    return "hello from %d" % lagless.compute_pid
