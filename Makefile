# queuectl: `make demo` runs the main job end to end, `make test` runs every test tier.
# Both create .venv and install queuectl into it first; nothing else is needed but python3 >= 3.11
# with its venv module (Debian/Ubuntu: apt-get install python3-venv).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean venv

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

clean:
	rm -rf $(VENV) demo-work .pytest_cache
