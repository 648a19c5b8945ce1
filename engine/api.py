"""What the window (app/ and widgets/) may use of the engine: this module, and nothing else.

An import-linter contract in pyproject.toml forbids app/ and widgets/ every other engine
module (app/entry.py, the console script that chooses between the CLI and the window,
is the one exception: it hands a command line to the CLI). A name the window needs is
added here, on purpose, in its group; the engine may move it between its own modules
without the window noticing. By room: the typed commands and events of the engine host;
errors and configuration; models and backends; the machine; measurements and their
analysis; session files; serving; tuning; the few CLI facts the window mirrors.

Everything here is plain Python (no onnxruntime, torch or Ray at import: those load in
the engine host, when a job needs them); importing it all costs about 0.6 s.
"""

from __future__ import annotations

from engine import (
    __version__,
    backends,  # the registry: get(name), all_backends(), file_filter(), ...
)
from engine.analysis import run_table
from engine.analysis.deltas import OpDiff
from engine.analysis.export import traceable_runs, write_trace
from engine.analysis.export_job import ExportRequest
from engine.analysis.likeness import Side, separated, unlike
from engine.analysis.llm_studies import HEAD as LLM_STUDY_HEAD
from engine.analysis.llm_studies import row_cells as llm_study_cells
from engine.analysis.llm_studies import study_title as llm_study_title
from engine.analysis.report import write_report
from engine.analysis.run_compare import RunComparison, compare_runs
from engine.analysis.run_pick import default_pair, run_label
from engine.analysis.run_summary import machine_text, summarize, with_recorded_stats
from engine.analysis.run_table import inputs_text
from engine.backends import Capabilities, all_backends, model_suffixes
from engine.backends.genai.hf_import import ImportRequest
from engine.backends.genai.model import genai_folder, read_config
from engine.backends.ort.quant_counts import quantized_summary
from engine.cli.arg_types import OneLineParser
from engine.cli.common import EXIT_INTERRUPTED
from engine.config import DEFAULT_MIN_COSINE, PRECISION_LABELS, RunConfig, provider_label
from engine.errors import ConfigError, OpScopeError, SessionFileError, escape_controls
from engine.events import (
    AccuracyResult,
    CommandFailed,
    ContentionSample,
    Event,
    GenerationStarted,
    GenerationSteps,
    Heartbeat,
    JobUpdate,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Notice,
    OpProfile,
    PeaksMeasured,
    Progress,
    RunEnded,
    RunStarted,
    ServedRequests,
    ServingStarted,
    ServingSummary,
    Telemetry,
    TimingDone,
    VariantReady,
    drive,
)
from engine.hostinfo import ort_version
from engine.machine.peaks import PeaksRequest, cached_peaks, roofs_for
from engine.measure.accuracy import describe_check
from engine.measure.contention import Contention, combine
from engine.measure.op_stats import OpStat
from engine.measure.roofline import MemoryRoof, Placement, Roofs, place
from engine.measure.stats import latency_stats, throughput
from engine.model.dims import MAX_DIM, SymbolicDim, describe_inputs, editable_dims
from engine.model.eval_data import check_data_file
from engine.model.graph_view import Tensor
from engine.model.info import ModelInfo
from engine.model.llm_sources import source_kind
from engine.model.model_explorer import export_overlay
from engine.model.realistic_inputs import check_tokenizer
from engine.model.sizes import device_copy_text, size_text
from engine.model.workload import JobInputs, Workload
from engine.remote.link import RemoteError
from engine.remote.target import Target
from engine.remote.window_host import FileSender, SshHost, finished_jobs, window_side
from engine.run import host_commands as commands
from engine.run.child_job import describe_exit
from engine.run.generation import GenerateRequest
from engine.run.graph_job import GraphRequest, GraphSoFar
from engine.run.host import host_main
from engine.run.host_jobs import HostJobs
from engine.run.jobs import job_name
from engine.run.memory_job import MemoryRequest
from engine.run.memory_trim import start_for_window as start_window_memory_trim
from engine.run.serving_jobs import CalibrateRequest, LoadRunRequest
from engine.run.wire import Channel, PipeConnection, StreamConnection, WireError
from engine.serve.batching import BatchPolicy
from engine.serve.llm.real_loop import check_real_layout
from engine.serve.llm.study import LLMStudyRequest, llm_serving_config, real_plan
from engine.serve.llm.study_plan import (
    DEFAULT_NEW,
    LLMPlan,
    kv_ms_per_mb,
    plan_layouts,
    plan_workload,
)
from engine.serve.records import OK, REJECTED, TIMED_OUT, UNSERVED
from engine.serve.sim.real_check import RealCheck
from engine.serve.sim.real_check import check as check_real_run
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.what_if import Question, answer
from engine.serve.sim.what_if import headline as what_if_headline
from engine.serve.sim.what_if_flags import calibration_drift
from engine.serve.traffic.schedule import parse_traffic, with_trace_window
from engine.session import writer_liveness
from engine.session.columns import lacking_note
from engine.session.compact_copy import Compacted, compact_copy
from engine.session.env import cpu_name, gpu_facts
from engine.session.reader import SessionReader
from engine.session.recorder import Recorder
from engine.session.rows import RunRow
from engine.session.store import SessionStore, open_session_file, remove_session_file
from engine.session.trust import corrupt
from engine.tune.pareto import front
from engine.tune.prompt_sweep import PromptPoint, PromptSweep, PromptSweepRequest
from engine.tune.search import Goal, TuneResult
from engine.tune.space import parse_space
from engine.tune.sweep import SweepPoint, parse_vary
from engine.tune.sweep import result_of as sweep_result_of
from engine.tune.sweep_job import SweepRequest, SweepStored
from engine.tune.trial import Trial, bench_argv
from engine.tune.tune_job import TuneRequest

__all__ = [
    "DEFAULT_MIN_COSINE",
    "DEFAULT_NEW",
    "EXIT_INTERRUPTED",
    "LLM_STUDY_HEAD",
    "MAX_DIM",
    "OK",
    "PRECISION_LABELS",
    "REJECTED",
    "TIMED_OUT",
    "UNSERVED",
    "AccuracyResult",
    "BatchPolicy",
    "CalibrateRequest",
    "Capabilities",
    "Channel",
    "CommandFailed",
    "Compacted",
    "ConfigError",
    "Contention",
    "ContentionSample",
    "Event",
    "ExportRequest",
    "FileSender",
    "GenerateRequest",
    "GenerationStarted",
    "GenerationSteps",
    "Goal",
    "GraphRequest",
    "GraphSoFar",
    "Heartbeat",
    "HostJobs",
    "ImportRequest",
    "JobInputs",
    "JobUpdate",
    "LLMPlan",
    "LLMStudyRequest",
    "LatencyBatch",
    "LoadRunRequest",
    "Marker",
    "MemoryRequest",
    "MemoryRoof",
    "ModelInfo",
    "ModelLoaded",
    "Notice",
    "OneLineParser",
    "OpDiff",
    "OpProfile",
    "OpScopeError",
    "OpStat",
    "PeaksMeasured",
    "PeaksRequest",
    "PipeConnection",
    "Placement",
    "Progress",
    "PromptPoint",
    "PromptSweep",
    "PromptSweepRequest",
    "Question",
    "RealCheck",
    "Recorder",
    "RemoteError",
    "Roofs",
    "RunComparison",
    "RunConfig",
    "RunEnded",
    "RunRow",
    "RunStarted",
    "ServedRequests",
    "ServiceModel",
    "ServingStarted",
    "ServingSummary",
    "SessionFileError",
    "SessionReader",
    "SessionStore",
    "Side",
    "SshHost",
    "StreamConnection",
    "SweepPoint",
    "SweepRequest",
    "SweepStored",
    "SymbolicDim",
    "Target",
    "Telemetry",
    "Tensor",
    "TimingDone",
    "Trial",
    "TuneRequest",
    "TuneResult",
    "VariantReady",
    "WireError",
    "Workload",
    "__version__",
    "all_backends",
    "answer",
    "backends",
    "bench_argv",
    "cached_peaks",
    "calibration_drift",
    "check_data_file",
    "check_real_layout",
    "check_real_run",
    "check_tokenizer",
    "combine",
    "commands",
    "compact_copy",
    "compare_runs",
    "corrupt",
    "cpu_name",
    "default_pair",
    "describe_check",
    "describe_exit",
    "describe_inputs",
    "device_copy_text",
    "drive",
    "editable_dims",
    "escape_controls",
    "export_overlay",
    "finished_jobs",
    "front",
    "genai_folder",
    "gpu_facts",
    "host_main",
    "inputs_text",
    "job_name",
    "kv_ms_per_mb",
    "lacking_note",
    "latency_stats",
    "llm_serving_config",
    "llm_study_cells",
    "llm_study_title",
    "machine_text",
    "model_suffixes",
    "open_session_file",
    "ort_version",
    "parse_space",
    "parse_traffic",
    "parse_vary",
    "place",
    "plan_layouts",
    "plan_workload",
    "provider_label",
    "quantized_summary",
    "read_config",
    "real_plan",
    "remove_session_file",
    "roofs_for",
    "run_label",
    "run_table",
    "separated",
    "size_text",
    "source_kind",
    "start_window_memory_trim",
    "summarize",
    "sweep_result_of",
    "throughput",
    "traceable_runs",
    "unlike",
    "what_if_headline",
    "window_side",
    "with_recorded_stats",
    "with_trace_window",
    "write_report",
    "write_trace",
    "writer_liveness",
]  # fmt: skip
