//! A fake `libnvidia-ml.so`: the NVML functions the agent calls, with the
//! names, signatures and return codes of `nvml.h`, answering from a
//! simulated host (`tessera-sim-host`, the model the agent's simulated
//! backend uses too) as NVIDIA documents the driver answers. The agent
//! loads it with `--nvml-library PATH`, so its NVML code (the safe
//! `nvml-wrapper` calls and the raw MIG and GPM calls) runs in CI exactly
//! as on a host.
//!
//! Set up through the environment of the process that loads it:
//! - `TESSERA_FAKE_NVML_HOST`: the simulated host file (the `--sim-host`
//!   format; its `health_file` is honoured: a lost GPU answers
//!   `NVML_ERROR_GPU_IS_LOST`). Without it `nvmlInit` answers
//!   `NVML_ERROR_DRIVER_NOT_LOADED`, as on a machine without the driver.
//! - `TESSERA_FAKE_NVML_STATE` (optional): a JSON file the GPUs' state is
//!   kept in, so MIG layouts survive the process, as on a GPU.
//! - `TESSERA_FAKE_NVML_PROCESSES` (optional): a TOML file of processes
//!   "running on" the GPUs (`[[process]]` with `pid`, `gpu`, optional
//!   `gi_start`, `used_mib`, `mps`), read at every call. Only processes that
//!   are alive count, so a test runs real processes and sees the agent
//!   stop them.
//! - `TESSERA_FAKE_NVML_CLOCK_MS` (optional): a fixed clock for the load
//!   figures (the simulated load is a function of time).
//!
//! What it follows, call by call, is cited where the call is answered.
//! Events (XIDs) are not simulated: `nvmlEventSetCreate` answers
//! `NVML_ERROR_NOT_SUPPORTED`, which the agent treats as "no XIDs".
//!
//! Every exported function follows nvml.h's contract: pointers must be
//! valid for the call (null where the header allows it); handles are the
//! ones this library handed out.
#![allow(unsafe_code)]
// The safety contract is nvml.h's, stated once above.
#![allow(clippy::missing_safety_doc)]

mod api;
mod device;
mod gpm;
mod handles;
mod mig;
mod state;
