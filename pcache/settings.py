"""`Settings`: how every command renders and hashes a request, embedded in each command's
options (`LintOptions`, `ReportOptions`, the replay drivers' options) instead of re-declared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcache.defaults import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_EXECUTOR,
    DEFAULT_HASH_ALGO,
    DEFAULT_PROFILE,
    DEFAULT_TOKENIZER,
    EXECUTORS,
    PROFILE_NAMES,
)
from pcache.errors import OptionError

if TYPE_CHECKING:
    from pcache.cache.hashing import HashSettings
    from pcache.prompt.renderers.interface import RenderOptions
    from pcache.prompt.renderers.rendered import RenderedPrompt

SETTINGS_FIELDS = (
    "tokenizer",
    "block_size",
    "hash_algo",
    "cache_salt",
    "date",
    "jobs",
    "executor",
    "ray_address",
)
"""The settings an option's keywords (`pcache.replay(block_size=...)`) or flags can set."""


def validate_date(date: str) -> str:
    """`date` when it is a calendar date (YYYY-MM-DD), else an `OptionError` for `date`."""
    from datetime import date as calendar_date

    try:
        calendar_date.fromisoformat(date)
    except ValueError:
        raise OptionError("date", f"must be YYYY-MM-DD, got {date!r}") from None
    return date


class WithSettings:
    """Options that embed a `Settings` (`settings`) read its fields through these names."""

    __slots__ = ()
    settings: Settings

    @property
    def tokenizer(self) -> str:
        return self.settings.tokenizer

    @property
    def profile(self) -> str:
        return self.settings.profile

    @property
    def block_size(self) -> int:
        return self.settings.block_size

    @property
    def date(self) -> str:
        return self.settings.date

    @property
    def jobs(self) -> int | None:
        return self.settings.jobs

    @property
    def executor(self) -> str:
        return self.settings.executor


@dataclass(frozen=True, slots=True)
class Settings:
    """Rendering and hashing settings chosen on the command line."""

    tokenizer: str = DEFAULT_TOKENIZER
    block_size: int = DEFAULT_BLOCK_SIZE
    hash_algo: str = DEFAULT_HASH_ALGO
    cache_salt: str | None = None
    date: str = DEFAULT_DATE
    add_generation_prompt: bool = True
    profile: str = DEFAULT_PROFILE
    """The cache whose reuse rules price what lint and the report find (`--profile`)."""
    jobs: int | None = None
    """Threads that encode a chunk's new text (`--jobs`; None: one per core). The results do
    not depend on it."""
    executor: str = DEFAULT_EXECUTOR
    """Where the render/tokenize/hash stage runs (`--executor`: local or ray); the results do
    not depend on it (`pcache.executors`)."""
    ray_address: str | None = None
    """The Ray cluster of `--executor ray` (`--ray-address`; None: a local one)."""

    def __post_init__(self) -> None:
        from pcache.cache.hashing import HashSettings

        if self.jobs is not None and self.jobs < 1:
            raise OptionError("jobs", f"must be at least 1, got {self.jobs}")
        if self.executor not in EXECUTORS:
            names = " or ".join(EXECUTORS)
            raise OptionError("executor", f"must be {names}, got {self.executor!r}")
        if self.ray_address is not None and self.executor != "ray":
            raise OptionError("ray_address", "applies to --executor ray")
        HashSettings(algo=self.hash_algo, block_size=self.block_size)  # validates both
        validate_date(self.date)
        if self.profile not in PROFILE_NAMES:
            names = ", ".join(PROFILE_NAMES)
            raise OptionError("profile", f"must be one of {names}, got {self.profile!r}")

    @property
    def job_count(self) -> int:
        """`jobs`, or one per core when it is None."""
        from pcache.prompt.tokenizers.threads import default_jobs

        return self.jobs or default_jobs()

    def render_options(self) -> RenderOptions:
        from pcache.prompt.renderers.interface import RenderOptions

        return RenderOptions(date=self.date, add_generation_prompt=self.add_generation_prompt)

    def hash_settings(self, rendered: RenderedPrompt) -> HashSettings:
        from pcache.cache.hashing import HashSettings

        salt = self.cache_salt if self.cache_salt is not None else rendered.request.cache_salt
        return HashSettings(
            algo=self.hash_algo,
            block_size=self.block_size,
            cache_salt=salt,
            renderer=rendered.renderer,
            template_digest=rendered.template_digest,
        )
