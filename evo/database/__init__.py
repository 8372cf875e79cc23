"""The program database: a durable SQLite store, islands, MAP-Elites archives and a facade.

    db = Database.open(run_dir, DatabaseConfig(objectives=("a", "b")))
    if not db.is_duplicate(code, island): db.add(code, evaluation, island=island, parents=ids)
    parents, inspirations = db.sample(island, rng); db.end_iteration()
"""

from evo.database.archive import Grid, GridArchive
from evo.database.config import DatabaseConfig, FeatureConfig, SearchSettings
from evo.database.database import DB_FILE, Database, EvaluatedCandidate, database_file
from evo.database.journal import Candidate, CandidateJournal
from evo.database.hashing import DEDUPE, dedupe_hash, exact_hash, normalize, normalized_hash
from evo.database.topology import TOPOLOGIES, topology
from evo.database.records import Program
from evo.database.store import Store

__all__ = [
    "Candidate", "CandidateJournal", "DB_FILE", "EvaluatedCandidate", "TOPOLOGIES", "Database", "DatabaseConfig", "FeatureConfig", "Grid", "GridArchive", "Program", "SearchSettings", "Store",
    "DEDUPE", "database_file", "dedupe_hash", "exact_hash", "normalize", "normalized_hash", "topology",
]
