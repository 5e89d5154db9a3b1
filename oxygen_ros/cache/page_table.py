"""PageTable: one sequence's ordered KV pages and how many tokens they hold."""

from dataclasses import dataclass, field


@dataclass
class PageTable:
    """Token i of the sequence lives in pages[i // page_size] at slot i % page_size."""
    owner: str
    pages: list[int] = field(default_factory=list)
    length: int = 0

    def slot(self, position: int, page_size: int) -> int:
        """Flat slot index (page * page_size + offset) of a token position."""
        return self.pages[position // page_size] * page_size + position % page_size

    def slots(self, start: int, count: int, page_size: int) -> list[int]:
        return [self.slot(p, page_size) for p in range(start, start + count)]
