"""`pip install ./sdk/python` installs the package, importable (it has no dependencies)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.fakebot import SDK


class PackagingTests(unittest.TestCase):
    def test_pip_installs_the_package_without_the_network(self):
        with tempfile.TemporaryDirectory() as scratch:
            source = os.path.join(scratch, "sdk")
            shutil.copytree(SDK, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
            target = os.path.join(scratch, "site")
            def pip(*extra):
                return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", target] + list(extra)
                                      + [source], capture_output=True, text=True, timeout=300)
            # The installed setuptools builds it when it can (no index needed);
            # an old setuptools without `wheel` needs pip's isolated build env.
            done = pip("--no-index", "--no-build-isolation")
            if done.returncode != 0 and "No module named pip" in done.stderr:
                self.skipTest("pip is not installed")
            if done.returncode != 0 and "bdist_wheel" in done.stderr:
                done = pip()
                if done.returncode != 0 and "satisfies the requirement setuptools" in done.stderr:
                    self.skipTest("neither `wheel` installed nor a package index for pip's build environment")
            self.assertEqual(done.returncode, 0, done.stderr)
            check = subprocess.run([sys.executable, "-c", "import roomkit_plugin; print(roomkit_plugin.__file__, "
                                    "roomkit_plugin.__version__, roomkit_plugin.Plugin.__name__)"],
                                   env=dict(os.environ, PYTHONPATH=target), capture_output=True, text=True, cwd=scratch)
            self.assertEqual(check.returncode, 0, check.stderr)
            self.assertTrue(check.stdout.startswith(os.path.join(target, "roomkit_plugin")), check.stdout)
            self.assertIn(" 1.0.0 Plugin", check.stdout)


if __name__ == "__main__":
    unittest.main()
