import unittest

from roman import from_roman, to_roman


class TestRoman(unittest.TestCase):
    def test_to(self):
        self.assertEqual(to_roman(1994), "MCMXCIV")

    def test_from_subtractive(self):
        self.assertEqual(from_roman("MCMXCIV"), 1994)

    def test_repeated_letters(self):
        self.assertEqual(from_roman("III"), 3)
        self.assertEqual(from_roman("XXVII"), 27)

    def test_round_trip(self):
        for n in range(1, 400):
            self.assertEqual(from_roman(to_roman(n)), n)


if __name__ == "__main__":
    unittest.main()
