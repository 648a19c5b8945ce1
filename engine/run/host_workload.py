"""What the engine host runs: the model the window loaded, the config it asked for, the
inputs (shapes, dims, data files) and a generating model's output length, as the window's
commands set them; every build is prepared from it (`request`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.model.workload import JobInputs, Workload
from engine.run import host_commands as cmds


@dataclass
class HostWorkload:
    model: str | None = None  # the loaded model's path (None: none loaded yet)
    config: RunConfig = field(default_factory=RunConfig)  # the config asked for last
    inputs: JobInputs = field(default_factory=JobInputs)
    new_tokens: int | None = None  # a generating model's, when the window set it

    def request(self, config: RunConfig) -> PrepareRequest:
        """The loaded model at `config` on these inputs."""
        assert self.model is not None
        workload = Workload(self.model, config, self.inputs)
        return PrepareRequest(workload, new_tokens=self.new_tokens)

    def load(self, cmd: cmds.Load) -> None:
        """A new model: its inputs as the command gives them (and its config, if any)."""
        if cmd.config is not None:  # the config to load it with (e.g. another engine)
            self.config = cmd.config
        self.model = cmd.path
        self.inputs = JobInputs(
            dict(cmd.shapes),
            dict(cmd.dims),
            inputs_npz=cmd.inputs_npz,
            calibration_npz=cmd.calibration_npz,
            tokenizer=cmd.tokenizer,
        )
        self.new_tokens = None

    def set_inputs(self, cmd: cmds.SetInputs, config: RunConfig) -> bool:
        """Take the command's dims and data files; whether they change what runs at
        `config` (calibration data matters to static INT8 only, a tokenizer when no
        inputs file gives the texts)."""
        old = self.inputs
        changed = (
            cmd.dims != old.dims
            or cmd.inputs_npz != old.inputs_npz
            or (cmd.tokenizer != old.tokenizer and cmd.inputs_npz is None)
            or (
                cmd.calibration_npz != old.calibration_npz
                and config.precision in ("int8", "int8-static")
            )
        )
        self.inputs = dataclasses.replace(
            old,
            dims=dict(cmd.dims),
            inputs_npz=cmd.inputs_npz,
            calibration_npz=cmd.calibration_npz,
            tokenizer=cmd.tokenizer,
        )
        return self.model is not None and changed

    def generation_shape(self, cmd: cmds.GenerationShape, config: RunConfig) -> None:
        """A generating model's prompt length (at `config`'s batch) and output length."""
        shapes = {**self.inputs.shapes, "input_ids": (config.batch, cmd.prompt_len)}
        self.inputs = dataclasses.replace(self.inputs, shapes=shapes)
        self.new_tokens = cmd.new_tokens
