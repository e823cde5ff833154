//! The process log: tracing's subscriber for the whole process, set up once from `log:` (text or
//! JSON lines, to stderr, stdout or a file), with a level filter that can be changed while the
//! process runs (reload, admin API) and a file that can be opened again after logrotate moved it
//! (`SIGUSR1`).
//!
//! The filter sits behind `tracing_subscriber::reload`: a callsite's interest is cached, so a
//! disabled `debug!` costs what it cost before; a change of level rebuilds the cache once.

use gatehouse_config::{Log, ProcessLogFormat};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

/// The environment variable whose filter, when set, replaces `log.level` at start.
pub const LEVEL_ENV: &str = "GATEHOUSE_LOG";

type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;

struct State {
    filter: reload::Handle<EnvFilter, Registry>,
    file: Option<Arc<LogFile>>,
    /// The settings the process started with (format and path change only on restart).
    started: Log,
    levels: Mutex<Levels>,
}

struct Levels {
    /// The filter in force.
    current: String,
    /// `log.level` of the configuration in force: a reload that changes it applies it.
    configured: String,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Why the process log could not be set up.
#[derive(Debug)]
pub enum InitError {
    /// The file could not be opened.
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The level (from `log.level` or `GATEHOUSE_LOG`) is not a filter.
    Level(String),
    /// A subscriber was already set for this process.
    AlreadySet,
}

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitError::Open { path, source } => write!(f, "log.path: cannot open {}: {source}", path.display()),
            InitError::Level(e) => write!(f, "log.level: {e}"),
            InitError::AlreadySet => f.write_str("the process log was already set up"),
        }
    }
}

impl std::error::Error for InitError {}

/// A log file opened for appending, replaced by [`reopen`].
struct LogFile {
    path: PathBuf,
    file: RwLock<Arc<File>>,
}

impl LogFile {
    fn open(path: &Path) -> io::Result<File> {
        std::fs::OpenOptions::new().create(true).append(true).open(path)
    }
}

/// Writes one event (tracing formats each into a buffer and writes it at once) to the file in
/// use when the event began.
struct FileWriter(Arc<File>);

impl Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

#[derive(Clone)]
struct ToFile(Arc<LogFile>);

impl<'a> MakeWriter<'a> for ToFile {
    type Writer = FileWriter;
    fn make_writer(&'a self) -> FileWriter {
        FileWriter(self.0.file.read().map(|f| f.clone()).unwrap_or_else(|p| p.into_inner().clone()))
    }
}

fn layer<W>(format: ProcessLogFormat, writer: W, ansi: bool) -> Box<dyn Layer<Filtered> + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        ProcessLogFormat::Text => fmt.with_ansi(ansi).with_target(false).boxed(),
        ProcessLogFormat::Json => fmt.json().flatten_event(true).with_current_span(false).with_span_list(false).boxed(),
    }
}

fn filter(level: &str) -> Result<EnvFilter, String> {
    gatehouse_config::check_log_level(level)?;
    EnvFilter::try_new(level).map_err(|e| e.to_string())
}

/// Sets up the process log from `cfg`; `GATEHOUSE_LOG`, when set, is the level to start with.
pub fn init(cfg: &Log) -> Result<(), InitError> {
    let from_env = std::env::var(LEVEL_ENV).ok().filter(|l| !l.trim().is_empty());
    let start = from_env.clone().unwrap_or_else(|| cfg.level.clone());
    let start_filter = filter(&start).map_err(|e| match &from_env {
        Some(_) => InitError::Level(format!("{LEVEL_ENV}: {e}")),
        None => InitError::Level(e),
    })?;
    let (reloadable, handle) = reload::Layer::new(start_filter);
    let is_terminal = |t: bool| t && cfg.format == ProcessLogFormat::Text;
    let mut file = None;
    let out = match cfg.path.as_str() {
        "stderr" => layer(cfg.format, io::stderr, is_terminal(io::IsTerminal::is_terminal(&io::stderr()))),
        "stdout" => layer(cfg.format, io::stdout, is_terminal(io::IsTerminal::is_terminal(&io::stdout()))),
        path => {
            let path = PathBuf::from(path);
            let opened = LogFile::open(&path).map_err(|source| InitError::Open { path: path.clone(), source })?;
            let f = Arc::new(LogFile { path, file: RwLock::new(Arc::new(opened)) });
            file = Some(f.clone());
            layer(cfg.format, ToFile(f), false)
        }
    };
    tracing_subscriber::registry().with(reloadable).with(out).try_init().map_err(|_| InitError::AlreadySet)?;
    let levels = Mutex::new(Levels { current: start, configured: cfg.level.clone() });
    STATE.set(State { filter: handle, file, started: cfg.clone(), levels }).map_err(|_| InitError::AlreadySet)
}

/// The level filter in force and the configured one; none when [`init`] did not run (a node
/// inside another program).
pub fn level() -> Option<(String, String)> {
    let s = STATE.get()?;
    let l = s.levels.lock().unwrap_or_else(|p| p.into_inner());
    Some((l.current.clone(), l.configured.clone()))
}

/// Why the level could not be changed.
#[derive(Debug, PartialEq, Eq)]
pub enum LevelError {
    /// Not a filter.
    Invalid(String),
    /// This process does not manage its log (a node inside another program).
    NotManaged,
}

/// Puts `level` in force until the next change (a call, or a reload that changes `log.level`).
pub fn set_level(level: &str) -> Result<(), LevelError> {
    let s = STATE.get().ok_or(LevelError::NotManaged)?;
    let f = filter(level).map_err(LevelError::Invalid)?;
    s.filter.reload(f).map_err(|e| LevelError::Invalid(e.to_string()))?;
    let mut l = s.levels.lock().unwrap_or_else(|p| p.into_inner());
    l.current = level.trim().to_string();
    Ok(())
}

/// Applies the `log:` of a configuration that replaced the running one: its level when it
/// differs from the configuration before (a level set through the admin API stays otherwise);
/// a changed format or path is logged as waiting for a restart.
pub fn apply(cfg: &Log) {
    let Some(s) = STATE.get() else { return };
    if cfg.format != s.started.format || cfg.path != s.started.path {
        tracing::warn!(field = "log", "log.format and log.path change only on restart; the running ones stay");
    }
    let changed = {
        let l = s.levels.lock().unwrap_or_else(|p| p.into_inner());
        l.configured != cfg.level
    };
    if changed {
        match set_level(&cfg.level) {
            Ok(()) => {
                s.levels.lock().unwrap_or_else(|p| p.into_inner()).configured = cfg.level.clone();
                tracing::info!(level = cfg.level, "process log level changed by the configuration");
            }
            Err(e) => tracing::error!(error = ?e, "log.level not applied"),
        }
    }
}

/// Opens the log file again at its path (`SIGUSR1`, after logrotate moved it); nothing to do
/// when the log goes to stderr or stdout. On failure the old file stays in use.
pub fn reopen() -> io::Result<bool> {
    let Some(f) = STATE.get().and_then(|s| s.file.as_ref()) else { return Ok(false) };
    let new = LogFile::open(&f.path)?;
    *f.file.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
    Ok(true)
}
