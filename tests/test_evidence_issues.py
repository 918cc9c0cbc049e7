"""retrieve/evidence and the report path of retrieve/search, on issues as people file them: an issue template's
comments and headings are not searched for, and the tests that reproduce a bug do not push the code to fix out of
the answer.

Real git repositories in tmp dirs, indexed without vectors (the report path is the BM25 arms, frames and the ranking
rules after them).
"""

from __future__ import annotations

from localidx.config import load_settings
from localidx.index.indexer import run_index
from localidx.retrieve import search
from localidx.retrieve.evidence import read_report
from localidx.store.index import open_index

TEMPLATE_ISSUE = """Calendar export drops the last week
<!-- Thanks for filing an issue! Please describe the bug clearly and
     include the exact version you are running. -->
### Describe the bug
The exported calendar stops one week early.
### Expected behavior
All weeks are exported.
- [x] I have searched the existing issues
- [ ] I have read the contributing guide
"""


def test_template_comments_headings_and_check_boxes_are_not_search_words():
    text = read_report(TEMPLATE_ISSUE).text
    assert "exported calendar stops one week early" in text
    for template_words in ("Thanks for filing", "exact version", "Describe the bug", "Expected behavior",
                           "searched the existing issues", "contributing guide"):
        assert template_words not in text


def _indexed(make_repo, tmp_path, files):
    root = make_repo(files)
    settings = load_settings(root, {"embed_model": "fake", "home": str(tmp_path / "home")})
    run_index(root, True, settings, embed=False)
    return open_index(root, True, settings, read_only=True)


REPRODUCED = "\n".join(
    f"def test_invoice_rounding_{n}():\n"
    f"    invoice = Invoice(total='10.005', currency='EUR')\n"
    f"    assert invoice.rounded_total() == '10.01'  # rounding half up for EUR invoices\n"
    for n in range(12))


def test_a_report_finds_the_code_to_fix_before_the_tests_that_reproduce_it(make_repo, tmp_path):
    index = _indexed(make_repo, tmp_path, {
        "billing/invoice.py": (
            "class Invoice:\n"
            "    def rounded_total(self):\n"
            "        \"\"\"The total rounded to the currency's cents.\"\"\"\n"
            "        return round(self.total, 2)\n"),
        "tests/test_invoice.py": REPRODUCED,
        "billing/report.py": "def monthly_report(rows):\n    return sum(r.amount for r in rows)\n",
    })
    report = ("Invoice rounded_total rounds 10.005 EUR down\n\n"
              "I create an invoice with total '10.005' and currency 'EUR' and call rounded_total():\n\n"
              "```\ninvoice = Invoice(total='10.005', currency='EUR')\ninvoice.rounded_total()  # gives '10.0'\n```\n"
              "I expected rounding half up for EUR invoices, as the other invoice totals are rounded.\n")
    try:
        matches = search(index, report, k=10, mode="bm25")
    finally:
        index.close()
    assert matches[0].path == "billing/invoice.py"
