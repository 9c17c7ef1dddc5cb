"""``kernelsearch audit``: judge a published set of kernels (a release's claims) with the evaluator.

One job per module: ``sources`` reads a release (a directory of pairs or JSON/JSONL rows) into
entries, ``classify`` names the kind of each failure from the verdict's reason, ``run``
evaluates the entries through bench's executor path in resumable chunks and summarises them,
``render`` prints the tables and writes the HTML page.
"""
