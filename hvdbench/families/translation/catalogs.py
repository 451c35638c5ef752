"""Built-in real parallel text: the German message catalogs Debian packages install.

    hvdbench prepare translation --src builtin:gettext-de --out data/gettext-de

Every program translated with GNU gettext ships its messages as a compiled catalog,
`/usr/share/locale/de/LC_MESSAGES/<domain>.mo`: English msgid -> German msgstr, written by human
translators. The catalogs of a fixed list of packages (`GETTEXT_PACKAGES`, which `make setup`
installs; the same array is in scripts/setup.sh and a test keeps the two equal) make an
English->German corpus of about 30,000 pairs with no download. The corpus depends on the
installed package versions, so they and a hash of the pairs go into the manifest.

The .mo files are parsed with `struct` (the GNU format: magic, string count, two tables of
(length, offset)), never with apt: no package is installed from here. Catalogs whose header
declares a charset other than UTF-8 are skipped, as are the `iso_*` name lists (country and
language names, not sentences). printf placeholders (`%s`, `%d`, `%1$s`) are kept verbatim: the
tokenizer keeps each one a token of its own.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
from pathlib import Path

from hvdbench.errors import DatasetError

BUILTIN_GETTEXT_DE = "builtin:gettext-de"
LOCALE_DIR = Path("/usr/share/locale/de/LC_MESSAGES")

# The Debian packages whose German catalogs make the corpus (keep equal to scripts/setup.sh's
# GETTEXT_PACKAGES; tests/unit/test_translation_data.py checks it).
GETTEXT_PACKAGES = ("git", "coreutils", "gnupg-l10n", "libc-l10n", "findutils", "grep", "diffutils", "sed",
                    "tar", "gettext", "wget", "make", "binutils-common", "libglib2.0-data", "dpkg", "apt",
                    "bash", "procps", "psmisc", "xz-utils", "m4")

# The debug flavors' evaluation cadence, in sentences (gnmt's and transformer's `eval_every`): 3/4 of
# the 16,304 training pairs this corpus gives at --max-len 64 on Debian 12, so a flavor's second
# evaluation falls at 1.5 epochs, where each passes its BLEU target on one rank.
DEBUG_EVAL_EVERY = 12_192

_MAGIC_LE, _MAGIC_BE = 0x950412DE, 0xDE120495
_CHARSET = re.compile(r"charset=([A-Za-z0-9_.:-]+)", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_ACCEL = re.compile(r"(?<![\w&])[_&](?=\w)")  # GTK/Qt menu accelerators: "_Datei", "&Open"


def read_mo(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """(charset, [(msgid, msgstr)]) of one compiled catalog: singular forms, context stripped,
    the header entry (empty msgid) and untranslated entries left out."""
    data = Path(path).read_bytes()
    if len(data) < 28:
        raise DatasetError(f"{path}: not a gettext .mo file (too short)")
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == _MAGIC_LE else ">" if magic == _MAGIC_BE else None
    if order is None:
        raise DatasetError(f"{path}: not a gettext .mo file (bad magic)")
    _, count, ids_at, strs_at = struct.unpack(order + "4I", data[4:20])
    raw = []
    try:
        for k in range(count):
            ilen, ioff = struct.unpack(order + "2I", data[ids_at + 8 * k:ids_at + 8 * k + 8])
            slen, soff = struct.unpack(order + "2I", data[strs_at + 8 * k:strs_at + 8 * k + 8])
            raw.append((data[ioff:ioff + ilen], data[soff:soff + slen]))
    except struct.error:
        raise DatasetError(f"{path}: truncated .mo file") from None
    header = next((s for i, s in raw if i == b""), b"").decode("ascii", "replace")
    m = _CHARSET.search(header)
    charset = (m.group(1) if m else "ascii").lower().replace("_", "-")
    pairs = []
    for msgid, msgstr in raw:
        if not msgid or not msgstr:
            continue
        msgid = msgid.split(b"\x04", 1)[-1]  # "context\x04message"
        pairs.append((msgid.split(b"\x00", 1)[0], msgstr.split(b"\x00", 1)[0]))  # singular forms
    if charset not in ("utf-8", "utf8"):
        return charset, []
    out = []
    for msgid, msgstr in pairs:
        try:
            out.append((msgid.decode("utf-8"), msgstr.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return charset, out


def clean(text: str) -> str:
    """One line: whitespace runs (newlines, tabs) become one space, menu accelerators go."""
    return _SPACE.sub(" ", _ACCEL.sub("", text)).strip()


def _dpkg_query(*args: str) -> str:
    exe = shutil.which("dpkg-query")
    if exe is None:
        raise DatasetError(f"{BUILTIN_GETTEXT_DE} needs a Debian system (no dpkg-query found) with the "
                           f"packages {' '.join(GETTEXT_PACKAGES)}")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, check=False)  # not installed: no line
    return proc.stdout


def package_versions(packages=GETTEXT_PACKAGES) -> dict[str, str | None]:
    """{package: installed version, or None when it is not installed}."""
    out = _dpkg_query("-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n", *packages)
    found = {}
    for line in out.splitlines():
        name, version, status = (line.split("\t") + ["", ""])[:3]
        if status == "installed":
            found[name.split(":")[0]] = version
    return {p: found.get(p) for p in packages}


def package_catalogs(package: str, locale_dir: Path = LOCALE_DIR) -> list[Path]:
    """The German .mo files `package` installed (from dpkg's file list), iso_* lists left out."""
    files = _dpkg_query("-L", package).splitlines()
    return sorted(Path(f) for f in files
                  if Path(f).parent == locale_dir and f.endswith(".mo") and not Path(f).name.startswith("iso_"))


def catalog_pairs(packages=GETTEXT_PACKAGES, locale_dir: Path = LOCALE_DIR) -> dict:
    """Every (English, German) pair of the packages' catalogs, in a fixed order, and what they came
    from: {"pairs", "versions", "catalogs": {file: pairs kept}, "skipped": {file: charset},
    "sha256"}. A package that is not installed, or whose catalog is missing, is a DatasetError
    naming it (install it with `make setup`)."""
    versions = package_versions(packages)
    missing = [p for p, v in versions.items() if v is None]
    if missing:
        raise DatasetError(f"{BUILTIN_GETTEXT_DE}: package(s) {' '.join(missing)} not installed "
                           f"(`make setup` installs them; as root: apt-get install {' '.join(missing)})")
    files: dict[str, list[Path]] = {p: package_catalogs(p, locale_dir) for p in packages}
    absent = [p for p, fs in files.items() if not fs or not all(f.is_file() for f in fs)]
    if absent:
        raise DatasetError(f"{BUILTIN_GETTEXT_DE}: no German catalog in {locale_dir} from package(s) "
                           f"{' '.join(absent)} (reinstall: apt-get install --reinstall {' '.join(absent)}; "
                           f"a dpkg path-exclude for /usr/share/locale would remove them)")
    pairs, seen, catalogs, skipped = [], set(), {}, {}
    digest = hashlib.sha256()
    for path in sorted({f for fs in files.values() for f in fs}):
        charset, entries = read_mo(path)
        if not entries:
            skipped[path.name] = charset
            continue
        kept = 0
        for en, de in entries:
            en, de = clean(en), clean(de)
            # Untranslated copies and repeats of a message another catalog already gave (gnulib's
            # "memory exhausted" is in a dozen) would leak between train and val.
            if not en or not de or en == de or en in seen:
                continue
            seen.add(en)
            pairs.append((en, de))
            digest.update(f"{en}\t{de}\n".encode())
            kept += 1
        catalogs[path.name] = kept
    return {"pairs": pairs, "versions": versions, "catalogs": catalogs, "skipped": skipped,
            "sha256": digest.hexdigest()}
