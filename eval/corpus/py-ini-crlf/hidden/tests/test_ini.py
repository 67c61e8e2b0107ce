import unittest

from inifile import parse_ini


class TestIni(unittest.TestCase):
    def test_sections(self):
        d = parse_ini("a = 1\n[server]\nHost = example.org\n")
        self.assertEqual(d, {"": {"a": "1"}, "server": {"host": "example.org"}})

    def test_comments(self):
        self.assertEqual(parse_ini("; x\n# y\nk=v\n"), {"": {"k": "v"}})

    def test_value_with_equals(self):
        self.assertEqual(parse_ini("url = a=b \n")[""]["url"], "a=b")

    def test_no_equals(self):
        with self.assertRaises(ValueError):
            parse_ini("junk\n")


if __name__ == "__main__":
    unittest.main()
