"""Profiles, read: what one rank's profile says (a Chrome trace from torch's profiler, or
torch_npu's analysed output on the 910C, text or database), which ranks profiled which steps,
and B0 beside a candidate. Nothing here judges: a profile is evidence beside a verdict.
"""

from ref2va_accept.profiles._compare import compare
from ref2va_accept.profiles._files import ProfileReadError
from ref2va_accept.profiles._folders import (
    ProfilesRead,
    analyse_command,
    find_profiles,
    metadata_ranks,
    read_profiles,
)
from ref2va_accept.profiles._text import profile_lines

__all__ = [
    "ProfileReadError",
    "ProfilesRead",
    "analyse_command",
    "compare",
    "find_profiles",
    "metadata_ranks",
    "profile_lines",
    "read_profiles",
]
