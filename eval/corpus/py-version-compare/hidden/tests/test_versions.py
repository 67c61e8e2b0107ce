import unittest

from versions import latest, newer


class TestVersions(unittest.TestCase):
    def test_simple(self):
        self.assertTrue(newer("1.2", "1.1"))

    def test_two_digit_parts(self):
        self.assertTrue(newer("1.10", "1.9"))
        self.assertFalse(newer("1.9", "1.10"))

    def test_latest(self):
        self.assertEqual(latest(["0.9.9", "0.10.0", "0.2.11"]), "0.10.0")


if __name__ == "__main__":
    unittest.main()
