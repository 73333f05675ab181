//! The agent's integration tests, one binary: the real `tessera-agent`
//! process against simulated hosts, the fake NVML library and real
//! processes, each module one area.

mod fake_nvml;
mod join_token_sources;
mod kit;
mod plan_cli;
mod shutdown;
mod sim_hosts_dir;
