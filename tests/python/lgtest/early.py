"""Imported by the python module's init (ABI 1.2 host->route_at), before any request: its
import says so on the error log (print goes to standard error)."""
import os

print("lgtest.early imported in pid %d" % os.getpid())


def hello(body, request):
    return "hello from %d" % os.getpid()
