"""`fsdp-skill fetch`: the docs sources (`upstream.fetch`), then the torch API of every declared release
(`upstream.releases`, read by `apidoc.release_api`). The two live in stages that may not import each
other's readers, so this thin handler wires them together."""

from __future__ import annotations

import argparse
import sys

from fsdp_skill.apidoc.release_api import read_release
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import writable_root
from fsdp_skill.upstream import fetch, releases


def cli_fetch(args: argparse.Namespace) -> int:
    """Handler of `fsdp-skill fetch [--only-releases | --skip-releases] [--release X.Y.Z]... [--refresh-releases]`."""
    if args.only_releases and args.skip_releases:
        raise UserError("--only-releases and --skip-releases exclude each other; pass one")
    if not args.only_releases:
        fetch.cli_fetch(args)
    if args.skip_releases:
        return 0
    root = writable_root("fetch rewrites the upstream/ cache next to the skill's data")
    if not args.release and not args.only_releases and not (root / releases.RELEASES_FILE).is_file():
        print(f"note: {releases.RELEASES_FILE} is absent here, so no torch release's API was read")
        return 0
    if args.release:
        wanted = [releases.check_release(r) for r in args.release]
    elif args.only_releases:  # a release newer than the newest cached one is found, not waited for by hand
        wanted, found = releases.discover_releases(root, releases.declared_releases(root))
        print(f"releases on the package index after the newest one declared or cached: {', '.join(found) or 'none'}",
              file=sys.stderr, flush=True)
    else:
        wanted = releases.declared_releases(root)
    update = releases.fetch_releases(root, wanted, read_release, refresh=args.refresh_releases,
                                     log=lambda line: print(line, file=sys.stderr, flush=True))
    print(releases.summary(update))
    return 0
