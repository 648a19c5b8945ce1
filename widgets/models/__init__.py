"""The views' data, apart from the views: plain numpy, never Qt (an import-linter
contract keeps it so), tested without a display."""
