//! Target `config`: any bytes as a configuration file. `gatehouse check` (compile, then build the
//! gateway's services, apps and plans) answers with errors, never a panic; a configuration it
//! accepts also builds the snapshot that `gatehouse run` serves, since an error there would mean
//! `check` passed a file that cannot run. The certificate files `check` also reads are left out:
//! they are files, not the text. The seed corpus holds the example configurations;
//! `fuzz/dict/config.dict` gives the fuzzer the model's keys and values.

use std::sync::Arc;

/// Compiles `data` as `gatehouse check` does and, when that passes, builds the snapshot.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match gatehouse_config::compile(text) {
        Ok(config) => config,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "a refused configuration names its errors");
            let _ = errors.to_string();
            return;
        }
    };
    let plugins = gatehouse_plugins::Registry::offline();
    if gatehouse_plugins::Gateway::build(&config, &plugins).is_err() {
        return;
    }
    // `gatehouse check` also reads upstream TLS files; a configuration naming unreadable ones is
    // refused there, as here.
    let tls_files_ok = config
        .upstreams
        .values()
        .filter_map(|u| u.tls.as_ref().map(|t| (t, u.protocol)))
        .all(|(t, protocol)| gatehouse_upstream::TlsClient::new(t, protocol).is_ok());
    if !tls_files_ok {
        return;
    }
    let built = gatehouse_proxy::Snapshot::build(
        Arc::new(config),
        1,
        &gatehouse_upstream::Registry::new(1),
        &gatehouse_proxy::RouteStatsRegistry::default(),
        &plugins,
        None,
        &gatehouse_upstream::Answers::new(),
    );
    if let Err(e) = built {
        panic!("`gatehouse check` accepts a configuration that does not build: {e}");
    }
}
