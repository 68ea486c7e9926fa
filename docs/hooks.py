"""MkDocs hook (mkdocs.yml `hooks:`): what the site says of each operation, from the registry.

Adding an operation is its module and one line in `delta_ops.ops.registry.ENTRIES`; the site
follows without an edit: each registered operation gets its API reference page
(``reference/ops/<module>.md``, listed in the nav after the registry's page) and its row in
the table of operations (``operations/index.md``, where the marker `TABLE_MARKER`
stands). `reference_pages`, `reference_nav` and `operations_table` are what the hook adds;
tests call them on a registry with a toy operation added.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# the worktree's package, whatever the environment has installed
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from delta_ops.ops.registry import OPERATIONS, Entry, Registry

#: where the table of operations goes in operations/index.md
TABLE_MARKER = "<!-- operations: written by docs/hooks.py from the registry -->"
#: the page the generated reference pages follow in the nav
REGISTRY_PAGE = "reference/ops/registry.md"


def _stem(entry: Entry) -> str:
    return entry.module_path.rpartition(".")[2]


def _title(entry: Entry) -> str:
    return entry.name.replace("_", " ").capitalize()


def reference_pages(registry: Registry = OPERATIONS) -> dict[str, str]:
    """The API reference page of each operation's module, by its path under docs/."""
    return {
        f"reference/ops/{_stem(e)}.md": (
            f"# `{e.module_path}`\n\n::: {e.module_path}\n    options:\n"
            "      show_root_heading: false\n"
        )
        for e in registry.entries
    }


def reference_nav(registry: Registry = OPERATIONS) -> list[dict[str, str]]:
    """The nav entries of the operations' reference pages, in the registry's order."""
    return [{_title(e): f"reference/ops/{_stem(e)}.md"} for e in registry.entries]


def operations_table(registry: Registry = OPERATIONS, guides: Path | None = None) -> str:
    """The table of operations: name (linking its guide in `guides`, else its reference
    page), CLI command, the name Dagster, Airflow and the history use, and what it does."""
    rows = [
        "| operation | CLI | Dagster, Airflow, history | what it does |",
        "|---|---|---|---|",
    ]
    for entry in registry.entries:
        operation = registry[entry.name]
        guide = f"{entry.command}.md"
        if guides is None or not (guides / guide).exists():
            guide = f"../reference/ops/{_stem(entry)}.md"
        label = entry.name.replace("_", " ")
        rows.append(
            f"| [{label}]({guide}) | `delta-ops {entry.command}` | `{entry.name}` |"
            f" {operation.help} |"
        )
    return "\n".join(rows)


def _insert_after(nav: list[Any], page: str, entries: list[dict[str, str]]) -> bool:
    """Put `entries` after the nav item naming `page` (searched depth first)."""
    for index, item in enumerate(nav):
        if isinstance(item, dict):
            for value in item.values():
                if value == page:
                    nav[index + 1 : index + 1] = entries
                    return True
                if isinstance(value, list) and _insert_after(value, page, entries):
                    return True
    return False


def on_config(config: Any, **kwargs: Any) -> Any:
    if not _insert_after(config["nav"], REGISTRY_PAGE, reference_nav()):
        raise ValueError(f"docs/hooks.py: the nav has no {REGISTRY_PAGE} to list operations after")
    return config


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    # the mkdocs API, imported by the build that runs the hook
    from mkdocs.structure.files import File

    for path, content in reference_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, **kwargs: Any) -> str:
    if TABLE_MARKER not in markdown:
        return markdown
    guides = Path(config["docs_dir"]) / "operations"
    return markdown.replace(TABLE_MARKER, operations_table(guides=guides))
