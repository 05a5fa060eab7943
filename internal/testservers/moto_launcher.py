"""Runs moto_server with SQS behaving as SQS does where the tests depend on it.

Moto returns a queue's RedrivePolicy as json.dumps writes it, with spaces after ":" and ",";
SQS returns it compact. The Terraform AWS provider compares the two as strings, so every plan
after an apply against moto shows a whitespace-only change to each queue with a dead-letter
queue. This launcher gives moto's SQS models a json module whose dumps is compact by default.

Moto serves requests on concurrent threads, and two concurrent ReceiveMessage calls can both
take the same visible message; SQS hides a received message from other receivers for its
visibility timeout. The launcher makes each receive atomic, releasing the lock while a long
poll waits for messages.
"""
import functools
import json
import sys
import threading

import moto.sqs.models as sqs_models
from moto.server import main


class _CompactJSON:
    def __getattr__(self, name):
        return getattr(json, name)

    @staticmethod
    def dumps(obj, **kwargs):
        kwargs.setdefault("separators", (",", ":"))
        return json.dumps(obj, **kwargs)


sqs_models.json = _CompactJSON()

_receive_lock = threading.Lock()
_receiving = threading.local()


def _atomic_receive(receive):
    @functools.wraps(receive)
    def wrapper(*args, **kwargs):
        with _receive_lock:
            _receiving.active = True
            try:
                return receive(*args, **kwargs)
            finally:
                _receiving.active = False

    return wrapper


def _waiting_unlocked(wait):
    @functools.wraps(wait)
    def wrapper(*args, **kwargs):
        if not getattr(_receiving, "active", False):
            return wait(*args, **kwargs)
        _receive_lock.release()
        try:
            return wait(*args, **kwargs)
        finally:
            _receive_lock.acquire()

    return wrapper


sqs_models.SQSBackend.receive_message = _atomic_receive(sqs_models.SQSBackend.receive_message)
sqs_models.Queue.wait_for_messages = _waiting_unlocked(sqs_models.Queue.wait_for_messages)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
