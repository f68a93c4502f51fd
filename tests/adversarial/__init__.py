"""The adversarial corpus for the trust boundary (issue 4): cases as data, run by
tests/adversarial/test_adversarial.py."""
