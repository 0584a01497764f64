"""What every evidence record shares: the strict record base and the scalar types the records use
(numbers as written, timestamps, sha256 digests)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

__all__ = ["JsonNumber", "Number", "OpenRecord", "Record", "Sha256", "Timestamp", "json_number",
           "written_rounded"]


class Record(BaseModel):
    """A record of the evidence: every key known (a misspelt one is an error), numbers as
    written (infinities and NaN too, as Python's json writes them)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants",
                              validate_by_alias=True, validate_by_name=True)

    def json_dict(self) -> dict[str, Any]:
        """The record as JSON holds it: by alias, with the keys it was read with (none added)."""
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return dumped

    def json_dict_full(self) -> dict[str, Any]:
        """The record as its writer writes it: by alias, every field, those left to their
        default too (`json_dict` leaves out a key the record was not given)."""
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return dumped


class OpenRecord(Record):
    """A record this run reads but did not write (an older ledger entry): the keys known today
    are typed, any other is kept as it was."""

    model_config = ConfigDict(extra="allow")


# -- scalars -------------------------------------------------------------------------------------

# A number as its writer gave it: an int stays an int (3 is written back as 3, not 3.0).
Number: TypeAlias = Annotated[int | float, WithJsonSchema({"type": "number"})]


def json_number(value: int | float | str | None) -> int | float | str | None:
    """A figure as JSON can hold it: strict JSON has no NaN or Infinity, so a non-finite float is
    spelt out as "nan", "inf" or "-inf" (unambiguous where a null would read as "missing");
    anything else as it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# A figure its writer spells out when JSON cannot hold it (json_number: "inf", "-inf", "nan"):
# a record built with a non-finite float writes it as that string.
JsonNumber: TypeAlias = Annotated[
    int | float | Literal["inf", "-inf", "nan"],
    PlainSerializer(json_number, when_used="json"),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}]})]


def written_rounded(digits: int) -> PlainSerializer:
    """A figure kept as its writer measured it and written to JSON rounded to `digits` places
    (Annotated[Number, written_rounded(3)]: a price to the millisecond)."""
    return PlainSerializer(lambda value: round(value, digits), when_used="json")


Timestamp: TypeAlias = Annotated[
    str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")]
Sha256: TypeAlias = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
