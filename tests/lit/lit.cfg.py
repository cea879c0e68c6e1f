"""lit configuration: FileCheck is the PyPI `filecheck` port; Kiln's console scripts come from
the environment Kiln is installed in."""
import os
import shutil
import sys

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".hlo", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Output", "inputs"]
config.environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
for var in ("HOME", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

filecheck = shutil.which("filecheck", path=config.environment["PATH"])
if filecheck is None:
    lit_config.fatal("the 'filecheck' command is missing: pip install filecheck")
config.substitutions.append(("FileCheck", filecheck))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "inputs")))
