"""What a model's answer cost: the prices per million tokens an ``INSPECTOR_LLM_MODELS`` entry may give
(``input_price``, ``output_price``), times the tokens the provider said it read and wrote."""

from __future__ import annotations

import functools
import json
from typing import Any

from django.conf import settings

__all__ = ["Price", "cost_of", "parse_prices"]

Price = tuple[float, float]  # per million input tokens, per million output tokens
PRICE_FIELDS = ("input_price", "output_price")


def _price(where: str, entry: dict[str, Any], field: str) -> float:
    value = entry.get(field, 0)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1_000_000:
        raise ValueError(f"{where}: {field} must be a number from 0 to 1000000 (per million tokens)")
    return float(value)


def parse_prices(text: str) -> dict[str, Price]:
    """Each priced model's prices by its name; ``ValueError`` says which entry's price is wrong. The
    list's other fields are ``sessions.providers.parse_models``'s to judge."""
    try:
        entries = json.loads(text) if text.strip() else []
    except ValueError:
        return {}  # parse_models says what is wrong with it
    prices: dict[str, Price] = {}
    for number, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict) or not any(field in entry for field in PRICE_FIELDS):
            continue
        where = f"model {number + 1}"
        name = entry.get("name", entry.get("model"))
        prices[str(name)] = (_price(where, entry, "input_price"), _price(where, entry, "output_price"))
    return prices


@functools.lru_cache(maxsize=4)
def _prices(text: str) -> dict[str, Price]:
    try:
        return parse_prices(text)
    except ValueError:
        return {}  # the start-up check and the page say why


def cost_of(key: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """What an answer of the model ``key`` cost, when its prices are configured and the provider gave
    both token counts; else None."""
    price = _prices(settings.INSPECTOR_LLM_MODELS).get(key)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
