"""Offline stand-in for ansible-test's pip bootstrap script (get-pip.py).

ansible-test downloads get-pip.py from a host this machine cannot reach; PyPI itself is
reachable. Called like get-pip.py (`python get_pip.py [pip options] pip==X ...`), this
installs the interpreter's bundled pip with ensurepip, then the requested packages.
ansible-test runs pip with a scrubbed environment, so the machine's CA bundle (needed
behind the TLS-intercepting proxy) is written into the venv's own pip.conf.
"""

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")

bundle = next((path for path in CA_BUNDLES if os.path.exists(path)), None)
if bundle:
    with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as config:
        config.write("[global]\ncert = %s\n" % bundle)
ensurepip.bootstrap()
arguments = [argument for argument in sys.argv[1:] if argument not in GET_PIP_ONLY]
certificate = ["--cert", bundle] if bundle else []
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q", *certificate, *arguments]))
