"""What the drivers' package (tools/pitfall_drivers/) shares: write_atomically, the one way the
drivers, containers/cell_entry.py and ci/'s generators write a file, and the command-line
helper's one style of error."""
import io
import os
import shutil
import stat
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from pitfall_drivers import cli  # noqa: E402
from pitfall_drivers.files import write_atomically  # noqa: E402


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class AtomicWrite(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir)
        # A umask that would leave a file unreadable to others: the mode given wins over it.
        self.addCleanup(os.umask, os.umask(0o077))

    def test_the_mode_is_set_whatever_the_umask(self):
        target = self.dir / "cell.json"
        write_atomically(target, "{}\n")
        self.assertEqual(target.read_text(), "{}\n")
        self.assertEqual(mode_of(target), 0o644)
        write_atomically(target, "{\"a\": 1}\n", mode=0o600)
        self.assertEqual(mode_of(target), 0o600)
        write_atomically(str(target), "é\n")  # a str path too; UTF-8 whatever the locale says
        self.assertEqual(target.read_bytes(), "é\n".encode("utf-8"))
        self.assertEqual(mode_of(target), 0o644)
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["cell.json"])

    def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(self):
        target = self.dir / "fleet.json"
        target.write_text("old\n")
        with self.assertRaises(UnicodeEncodeError):  # a lone surrogate: no UTF-8 for it
            write_atomically(target, "new \ud800\n")
        self.assertEqual(target.read_text(), "old\n")
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["fleet.json"])

    def test_a_failed_rename_leaves_no_temporary_file(self):
        (self.dir / "taken").mkdir()  # a folder where the file should go: the rename fails
        with self.assertRaises(OSError):
            write_atomically(self.dir / "taken", "text\n")
        self.assertEqual(sorted(p.name for p in self.dir.iterdir()), ["taken"])
        self.assertEqual(list((self.dir / "taken").iterdir()), [])

    def test_a_missing_folder_is_an_oserror_and_creates_nothing(self):
        with self.assertRaises(FileNotFoundError):
            write_atomically(self.dir / "no-such-folder" / "x.json", "{}\n")
        self.assertEqual(list(self.dir.iterdir()), [])


class CommandLine(unittest.TestCase):
    def parser(self) -> cli.Parser:
        p = cli.Parser(prog="pitfall demo run", add_help=False)
        p.add_argument("--jobs", type=int, default=1)
        return p

    def test_a_bad_flag_is_bad_input_naming_it(self):
        with self.assertRaisesRegex(cli.BadInput, r"`pitfall demo run`: argument --jobs: invalid int value: 'x'"):
            cli.parse(self.parser(), ["--jobs", "x"])
        with self.assertRaisesRegex(cli.BadInput, r"unknown option '--colour' for `pitfall demo run`"):
            cli.parse(self.parser(), ["--colour"])
        self.assertEqual(cli.parse(self.parser(), ["--jobs", "3"]).jobs, 3)

    def test_bad_input_is_one_line_and_exit_2(self):
        def command(argv):
            cli.parse(self.parser(), argv)
            return cli.EXIT_OK

        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(cli.guarded("pitfall demo", command, ["--jobs"]), cli.EXIT_USAGE)
        self.assertEqual(err.getvalue(), "pitfall demo: error: `pitfall demo run`: argument --jobs: expected one "
                                         "argument (see `pitfall demo --help`)\n")
        self.assertEqual((cli.EXIT_OK, cli.EXIT_DIFFERS, cli.EXIT_USAGE, cli.EXIT_INTERRUPTED), (0, 1, 2, 130))


if __name__ == "__main__":
    unittest.main()
