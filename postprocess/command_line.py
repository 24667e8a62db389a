"""What trident-post and trident-data share: a parser with one subcommand per module of a package,
each module contributing its own `add_parser(subparsers)`."""
import argparse
import importlib


def subcommand_parser(prog, description, epilog, version, package, names):
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in names:
        importlib.import_module(f".{name}", package).add_parser(subparsers)
    return parser
