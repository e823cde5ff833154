//! `gatehouse convert`: reads the file, runs the converter ([`gatehouse_convert`]) and writes its
//! output, key files and notes.

use gatehouse_convert::{hyperapi, Conversion};
use std::path::Path;
use std::process::ExitCode;

/// The command: converts `file` and writes the result to `output` (key files beside it, in
/// `keys/`, named relative to it as every path of a configuration is read) or to standard
/// output; notes go to standard error.
pub fn run(from: &str, file: &Path, output: Option<&Path>) -> ExitCode {
    if from != "hyperapi" {
        eprintln!("gatehouse: cannot convert from `{from}`: the supported format is `hyperapi`");
        return ExitCode::FAILURE;
    }
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse: cannot read {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let conversion = match hyperapi(&text, &file.display().to_string(), Path::new("keys")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gatehouse: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    for n in &conversion.notes {
        eprintln!("{n}");
    }
    if let Err(e) = write(&conversion, output) {
        eprintln!("gatehouse: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "gatehouse: converted {} to {}: {} item(s) not carried over as they were",
        file.display(),
        output.map_or("standard output".to_string(), |o| o.display().to_string()),
        conversion.notes.len()
    );
    ExitCode::SUCCESS
}

fn write(conversion: &Conversion, output: Option<&Path>) -> Result<(), String> {
    let Some(out) = output else {
        print!("{}", conversion.yaml);
        for k in &conversion.key_files {
            eprintln!(
                "{}: not written without --output: save it as {} beside the configuration",
                k.source,
                k.path.display()
            );
        }
        return Ok(());
    };
    let out_dir = gatehouse_config::config_dir(out);
    for k in &conversion.key_files {
        let path = out_dir.join(&k.path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&path, &k.pem).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    std::fs::write(out, &conversion.yaml).map_err(|e| format!("cannot write {}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_format_or_a_missing_file_fails() {
        assert_eq!(run("kong", Path::new("/nonexistent"), None), ExitCode::FAILURE);
        assert_eq!(run("hyperapi", Path::new("/nonexistent/hyperapi.yaml"), None), ExitCode::FAILURE);
    }
}
