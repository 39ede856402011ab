PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# schedfence/ laid out as it is imported (its files and rooms linked to the repository's), on
# sys.path through a .pth file: type checkers cannot follow the editable install's import hook
# (the rooms are mapped by package-dir), a plain path they do. Python imports through it too.
TYPED := $(CURDIR)/$(VENV)/typed

.PHONY: demo test clean

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	rm -rf $(TYPED) && mkdir -p $(TYPED)/schedfence
	ln -s $(CURDIR)/schedfence/*.py $(CURDIR)/schedfence/py.typed $(CURDIR)/domain \
	    $(CURDIR)/projections $(CURDIR)/infra $(TYPED)/schedfence/
	echo $(TYPED) > "$$($(BIN)/python -c \
	    'import sysconfig; print(sysconfig.get_path("purelib"))')/schedfence_typed.pth"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/schedfence demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
