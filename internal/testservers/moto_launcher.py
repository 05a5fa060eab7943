"""Runs moto_server with SQS queue attributes serialised as AWS serialises them.

Moto returns a queue's RedrivePolicy as json.dumps writes it, with spaces after ":" and ",";
SQS returns it compact. The Terraform AWS provider compares the two as strings, so every plan
after an apply against moto shows a whitespace-only change to each queue with a dead-letter
queue. This launcher gives moto's SQS models a json module whose dumps is compact by default.
"""
import json
import sys

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

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
