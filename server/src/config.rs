//! Server configuration: a TOML file, then `TESSERA_*` environment variables on top.
//!
//! An environment variable names a key by its path with `__` between levels:
//! `TESSERA_DATABASE__URL` sets `[database] url`, `TESSERA_OIDC__CLIENT_SECRET`
//! sets `[oidc] client_secret`. Its value is text, typed by the field it sets
//! ([`typed`]): a secret of `123456` stays the string `123456`. A variable
//! ending in `_FILE` reads the value from that file instead
//! (`TESSERA_OIDC__CLIENT_SECRET_FILE=/run/secrets/oidc`, as Kubernetes
//! mounts Secrets); no key ends in `_file`, so this is never ambiguous.
//! Unknown keys, in the file or the environment, are rejected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use tessera_service::Directory;
use thiserror::Error;

/// A value that must never be printed.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Serialized as `***` (the configuration reference test lists keys, never
/// values).
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Listening and public address.
    #[serde(default)]
    pub server: ServerConfig,
    /// Database.
    #[serde(default)]
    pub database: DatabaseConfig,
    /// Single sign-on.
    pub oidc: OidcConfig,
    /// Sessions.
    #[serde(default)]
    pub session: SessionConfig,
    /// Host agents.
    #[serde(default)]
    pub agents: AgentsConfig,
    /// Tenants and group mapping.
    #[serde(default)]
    pub directory: Directory,
    /// GPU pools (`[[pools]]`).
    #[serde(default)]
    pub pools: Vec<tessera_service::pools::PoolSpec>,
    /// Priority classes requests may choose (`[[priority_classes]]`).
    #[serde(default)]
    pub priority_classes: Vec<tessera_core::schedule::PriorityClass>,
    /// Quota approvals.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// Outgoing tenant webhooks.
    #[serde(default)]
    pub webhooks: WebhooksConfig,
    /// Rate, size and time limits.
    #[serde(default)]
    pub limits: crate::security::limits::LimitsConfig,
    /// The Prometheus endpoint.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Tenant API tokens.
    #[serde(default)]
    pub api_tokens: ApiTokensConfig,
    /// How long GPU telemetry is kept (`[telemetry]`: `raw_hours`,
    /// `minute_days`, `hour_days`).
    #[serde(default)]
    pub telemetry: tessera_service::telemetry::TelemetryPolicy,
    /// How long audit rows are kept (`[audit]`: `keep_days`; unset: forever).
    #[serde(default)]
    pub audit: tessera_service::audit_retention::AuditRetention,
    /// Right-sizing advice (`[rightsizing]`: `min_measured_minutes`,
    /// `memory_headroom_pct`, `memory_headroom_min_mib`,
    /// `compute_headroom_pct`).
    #[serde(default)]
    pub rightsizing: tessera_core::rightsize::RightSizing,
    /// Which HTTPS servers outbound calls trust.
    #[serde(default)]
    pub tls: TlsConfig,
}

/// `[tls]`
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// A PEM file of CA certificates trusted besides the operating system's
    /// store and the bundled web roots, by every outbound HTTPS call: OIDC
    /// discovery and token calls, and webhooks (a company's internal CA).
    pub ca_bundle: Option<std::path::PathBuf>,
}

impl TlsConfig {
    /// The trust outbound clients are built with.
    pub fn trust(&self) -> Result<tessera_trust::Trust, ConfigError> {
        tessera_trust::Trust::from_optional_bundle(self.ca_bundle.as_deref()).map_err(|e| {
            ConfigError::Value {
                field: "tls.ca_bundle".to_owned(),
                message: e.to_string(),
            }
        })
    }
}

/// `[metrics]`
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// When set, `/metrics` answers only `Authorization: Bearer <token>`
    /// (Prometheus's `authorization` setting); otherwise anyone who can
    /// reach the listening address can read it.
    pub bearer_token: Option<Secret>,
}

/// `[api_tokens]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiTokensConfig {
    /// Lifetime of a token created without one, in days.
    pub default_days: u32,
    /// Longest lifetime a token may be given, in days.
    pub max_days: u32,
    /// A token stops working when the person who made it has not signed
    /// in for this many days (their roles come from that sign-in).
    pub creator_signin_days: u32,
}

impl Default for ApiTokensConfig {
    fn default() -> Self {
        let p = tessera_service::api_tokens::ApiTokenPolicy::default();
        Self {
            default_days: p.default_days,
            max_days: p.max_days,
            creator_signin_days: p.creator_signin_days,
        }
    }
}

impl ApiTokensConfig {
    /// The service's policy.
    pub fn policy(&self) -> tessera_service::api_tokens::ApiTokenPolicy {
        tessera_service::api_tokens::ApiTokenPolicy {
            default_days: self.default_days,
            max_days: self.max_days,
            creator_signin_days: self.creator_signin_days,
        }
    }
}

/// `[approvals]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// Four-eyes: nobody decides a quota request they filed or submitted,
    /// or one of a tenant they administer.
    pub four_eyes: bool,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self { four_eyes: true }
    }
}

/// `[webhooks]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// First retry after this many seconds, doubling each time (capped at an
    /// hour; 8 tries in all).
    pub retry_base_seconds: u64,
    /// A receiver that does not answer within this many seconds failed.
    pub timeout_seconds: u64,
    /// Calls in flight to one tenant's receiver at most.
    pub per_tenant_concurrency: u64,
    /// Internal networks webhooks may reach, e.g. `["10.20.0.0/16"]`
    /// (loopback, private, link-local and other internal addresses are
    /// refused otherwise).
    pub allowed_networks: tessera_service::notifications::EgressPolicy,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            retry_base_seconds: 5,
            timeout_seconds: 10,
            per_tenant_concurrency: 2,
            allowed_networks: Default::default(),
        }
    }
}

/// `[server]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The URL users reach Tessera at (used for the OIDC redirect; `https` turns on Secure cookies).
    pub public_url: String,
    /// Directory with the built site (`pkg/` with the WASM bundle and CSS).
    pub site_root: String,
    /// Log format: `pretty` or `json`.
    pub log_format: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            public_url: "http://127.0.0.1:3000".to_owned(),
            site_root: "target/site".to_owned(),
            log_format: "pretty".to_owned(),
        }
    }
}

/// `[database]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://FILE?mode=rwc` or `postgres://user@host/db`.
    pub url: Secret,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: Secret("sqlite://tessera.db?mode=rwc".to_owned()),
        }
    }
}

/// `[oidc]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The IdP's issuer URL (discovery at `/.well-known/openid-configuration`).
    pub issuer_url: String,
    /// Client id registered at the IdP.
    pub client_id: String,
    /// Client secret registered at the IdP.
    pub client_secret: Secret,
    /// Redirect URL registered at the IdP; defaults to `<public_url>/auth/callback`.
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// The id_token claim that carries group names.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Scopes to ask for besides `openid`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

fn default_scopes() -> Vec<String> {
    vec![
        "profile".to_owned(),
        "email".to_owned(),
        "groups".to_owned(),
    ]
}

/// `[session]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// A session unused for this long ends.
    pub idle_timeout_minutes: i64,
    /// A session ends this long after login, used or not.
    pub absolute_timeout_hours: i64,
    /// Roles come from the IdP's groups at sign-in; this long after it the
    /// session ends and the next page goes through the IdP again (without a
    /// prompt while the IdP session lives), so a person removed from a group
    /// loses its role within this many minutes.
    pub membership_recheck_minutes: i64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            idle_timeout_minutes: 8 * 60,
            absolute_timeout_hours: 24,
            membership_recheck_minutes: 15,
        }
    }
}

impl SessionConfig {
    /// How long a session lives after sign-in: until its roles must be
    /// re-checked, and never past the absolute timeout.
    pub fn max_age_seconds(&self) -> i64 {
        (self.absolute_timeout_hours.saturating_mul(3600))
            .min(self.membership_recheck_minutes.saturating_mul(60))
    }
}

/// `[agents]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// A host silent for longer than this is shown offline.
    pub offline_after_seconds: i64,
    /// How often agents are asked to report.
    pub report_interval_seconds: i64,
    /// A host silent for longer than this has lost its slices: they are
    /// marked (placed ones go back to the queue) and their owners told.
    pub lost_after_seconds: i64,
    /// A slice the host has not made active this long after placement fails
    /// (and its quota returns).
    pub provision_timeout_seconds: i64,
    /// How often the allocation timer runs (lease ends, queue), in milliseconds.
    pub scheduler_interval_ms: u64,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            offline_after_seconds: 30,
            report_interval_seconds: 5,
            lost_after_seconds: 300,
            provision_timeout_seconds: 300,
            scheduler_interval_ms: 1000,
        }
    }
}

/// Why configuration could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// File path.
        path: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// The TOML (after environment overrides) is not a valid configuration.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A value is well-formed but unusable.
    #[error("invalid configuration: {field}: {message}")]
    Value {
        /// Dotted key.
        field: String,
        /// What to change.
        message: String,
    },
}

/// Longest idle session timeout: 30 days.
const MAX_SESSION_IDLE_MINUTES: i64 = 30 * 24 * 60;
/// Longest absolute session timeout: a year.
const MAX_SESSION_HOURS: i64 = 365 * 24;
/// Longest agent interval or timeout: 30 days.
const MAX_AGENT_INTERVAL_SECONDS: i64 = 30 * 24 * 3600;

/// Prefix of configuration environment variables.
pub const ENV_PREFIX: &str = "TESSERA_";

/// Whether an environment variable names a configuration key: the prefix, then
/// `SECTION__KEY`. Others with the prefix (`TESSERA_CONFIG`, `TESSERA_LOG`, the
/// agent's `TESSERA_SERVER`, ...) are not configuration.
fn is_config_var(name: &str) -> bool {
    name.strip_prefix(ENV_PREFIX)
        .is_some_and(|rest| rest.contains("__"))
}

impl Config {
    /// Loads `path` (if given) and applies `env` overrides.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.display().to_string(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_toml_and_env(&text, env)
    }

    /// Parses TOML text and applies `env` overrides.
    pub fn from_toml_and_env(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.to_string()))?;
        for (key, value) in overrides(env)? {
            apply_override(&mut root, &key, value)?;
        }
        let config: Config = serde_path_to_error::deserialize(typed::Typed(toml::Value::Table(
            root,
        )))
        .map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                ConfigError::Invalid(inner.to_string())
            } else {
                ConfigError::Invalid(format!("{path}: {inner}"))
            }
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |field: &str, message: &str| {
            Err(ConfigError::Value {
                field: field.to_owned(),
                message: message.to_owned(),
            })
        };
        if url::Url::parse(&self.server.public_url).is_err() {
            return bad(
                "server.public_url",
                "must be an absolute URL such as https://gpus.example.com",
            );
        }
        if url::Url::parse(&self.oidc.issuer_url).is_err() {
            return bad(
                "oidc.issuer_url",
                "must be an absolute URL such as https://login.example.com/realms/main",
            );
        }
        if tessera_service::DbKind::of_url(self.database.url.expose()).is_none() {
            return bad("database.url", "must start with sqlite: or postgres://");
        }
        if !(1..=MAX_SESSION_IDLE_MINUTES).contains(&self.session.idle_timeout_minutes)
            || !(1..=MAX_SESSION_HOURS).contains(&self.session.absolute_timeout_hours)
            || !(1..=MAX_SESSION_HOURS * 60).contains(&self.session.membership_recheck_minutes)
        {
            return bad(
                "session",
                "timeouts must be between 1 minute and 30 days (idle) / 1 hour and 1 year (absolute)",
            );
        }
        let agent_intervals = [
            self.agents.offline_after_seconds,
            self.agents.report_interval_seconds,
            self.agents.provision_timeout_seconds,
            self.agents.lost_after_seconds,
        ];
        if agent_intervals
            .iter()
            .any(|s| !(1..=MAX_AGENT_INTERVAL_SECONDS).contains(s))
        {
            return bad("agents", "intervals must be between 1 second and 30 days");
        }
        if self.agents.lost_after_seconds < self.agents.offline_after_seconds {
            return bad(
                "agents.lost_after_seconds",
                "must be at least agents.offline_after_seconds: a host is offline before its slices count as lost",
            );
        }
        for (section, checked) in [
            ("api_tokens", self.api_tokens.policy().validate()),
            ("telemetry", self.telemetry.validate()),
            ("audit", self.audit.validate()),
        ] {
            if let Err(e) = checked {
                if let tessera_service::ServiceError::Invalid { field, message } = e {
                    return bad(&field, &message);
                }
                return bad(section, &e.to_string());
            }
        }
        if let Err((field, message)) = self.rightsizing.validate() {
            return bad(&format!("rightsizing.{field}"), message);
        }
        if self.limits.max_body_kib < 16 || self.limits.request_timeout_seconds < 1 {
            return bad(
                "limits",
                "max_body_kib must be at least 16 and request_timeout_seconds at least 1",
            );
        }
        if self.webhooks.per_tenant_concurrency < 1 {
            return bad("webhooks.per_tenant_concurrency", "must be at least 1");
        }
        if !matches!(self.server.log_format.as_str(), "pretty" | "json") {
            return bad("server.log_format", "must be \"pretty\" or \"json\"");
        }
        // A CA bundle that cannot be read stops the start, not the first sign-in.
        self.tls.trust()?;
        Ok(())
    }

    /// The OIDC redirect URL.
    pub fn redirect_url(&self) -> String {
        self.oidc.redirect_url.clone().unwrap_or_else(|| {
            format!(
                "{}/auth/callback",
                self.server.public_url.trim_end_matches('/')
            )
        })
    }

    /// Whether cookies must be `Secure`.
    pub fn secure_cookies(&self) -> bool {
        self.server.public_url.starts_with("https://")
    }

    /// The session cookie's name: with the `__Host-` prefix over https, so
    /// the browser accepts it only from this host, Secure, for the whole
    /// path (a sibling host cannot plant or shadow it).
    pub fn session_cookie_name(&self) -> &'static str {
        if self.secure_cookies() {
            "__Host-tessera_session"
        } else {
            "tessera_session"
        }
    }
}

/// Suffix of a variable whose value is read from the file it names.
const FILE_SUFFIX: &str = "_FILE";

/// The configuration variables of `env`, by key, in a fixed order, with
/// `*_FILE` variables replaced by their file's contents (without the
/// trailing newline `echo` or an editor leaves). A key set both ways is an
/// error.
fn overrides(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut by_key = std::collections::BTreeMap::<String, (String, String)>::new();
    for (var, value) in env.into_iter().filter(|(k, _)| is_config_var(k)) {
        let (key, value) = match var.strip_suffix(FILE_SUFFIX) {
            Some(key) => {
                let text = std::fs::read_to_string(&value).map_err(|source| ConfigError::Read {
                    path: format!("{value} (named by {var})"),
                    source,
                })?;
                (
                    key.to_owned(),
                    text.trim_end_matches(['\n', '\r']).to_owned(),
                )
            }
            None => (var.clone(), value),
        };
        if let Some((other, _)) = by_key.get(&key) {
            return Err(ConfigError::Invalid(format!(
                "{other} and {var} both set {key}: keep one"
            )));
        }
        by_key.insert(key, (var, value));
    }
    Ok(by_key.into_iter().map(|(k, (_, v))| (k, v)).collect())
}

/// Sets the key `env_key` names to `value`, as text ([`typed`] gives it its
/// field's type).
fn apply_override(root: &mut toml::Table, env_key: &str, value: String) -> Result<(), ConfigError> {
    let path: Vec<String> = env_key[ENV_PREFIX.len()..]
        .split("__")
        .map(|s| s.to_ascii_lowercase())
        .collect();
    if path.iter().any(String::is_empty) {
        return Err(ConfigError::Invalid(format!(
            "{env_key}: empty key segment"
        )));
    }
    let mut table = root;
    for section in &path[..path.len() - 1] {
        let entry = table
            .entry(section.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(ConfigError::Invalid(format!(
                    "{env_key}: '{section}' is not a section"
                )))
            }
        };
    }
    let leaf = path.last().cloned().unwrap_or_default();
    table.insert(leaf, toml::Value::String(value));
    Ok(())
}

mod typed;

#[cfg(test)]
mod tests;
