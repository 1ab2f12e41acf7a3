# queuectl: `make demo` runs the main job end to end, `make test` runs every test tier.
# Both create .venv and install queuectl into it first; nothing else is needed but python3 >= 3.11
# with its venv module (Debian/Ubuntu: apt-get install python3-venv).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-startup clean venv deb

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "queuectl needs Python >= 3.11 as '$(PYTHON)' (Debian/Ubuntu: apt-get install python3)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || \
	  { echo "$(PYTHON) lacks the venv module: install it with 'apt-get install python3-venv' (as root)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

demo: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" sh demo/demo.sh

test: $(STAMP)
	$(BIN)/python -m pytest

# Throughput, latency, scale and retention, on SQLite and PostgreSQL, as same-run ratios (about 20 minutes).
bench: $(STAMP)
	$(BIN)/python bench/run.py

# The start-up figure alone (section 4's first row): one enqueue against importing click, sqlite3 and json.
bench-startup: $(STAMP)
	$(BIN)/python bench/startup.py

# The Debian package, built by dpkg-buildpackage from a copy of the tree (tracked and new files)
# with Debian's own python3; the .deb lands in build/deb/.
DEB_PATH := /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
DEB_TOOLS := build-essential debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools \
             python3-click python3-click-man python3-daemon python3-sdnotify python3-croniter tzdata python3-pytest python3-pytest-timeout \
             python3-prometheus-client python3-hypothesis python3-flask python3-gunicorn python3-bcrypt
deb:
	@PATH=$(DEB_PATH) command -v dpkg-buildpackage >/dev/null && PATH=$(DEB_PATH) dpkg-checkbuilddeps 2>/dev/null || \
	  { echo "make deb needs Debian's build tools: apt-get install $(DEB_TOOLS)" >&2; exit 1; }
	rm -rf build/deb && mkdir -p build/deb/src
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --parents -t build/deb/src; \
	else \
	  tar --exclude=./.venv --exclude=./build --exclude=./demo-work -cf - . | tar -xf - -C build/deb/src; \
	fi
	cd build/deb/src && PATH=$(DEB_PATH) dpkg-buildpackage -us -uc -b
	@ls build/deb/*.deb

clean:
	rm -rf $(VENV) demo-work .pytest_cache build
