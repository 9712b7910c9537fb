//! `muster cluster` as a child process for the end-to-end benchmarks
//! (`sim_scale`, `what_if`): started on a free port, stopped (SIGTERM) when
//! dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Server {
    pub child: Child,
    /// The address it serves, `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Server {
    /// `nodes` kwok nodes; a kubeconfig for it written to `kubeconfig` when given.
    pub fn start(nodes: usize, kubeconfig: Option<&Path>) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_muster"));
        cmd.args([
            "cluster",
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            &nodes.to_string(),
        ]);
        if let Some(path) = kubeconfig {
            cmd.arg("--kubeconfig-out").arg(path);
        }
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("muster cluster starts");
        let mut url = String::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        BufReader::new(stdout)
            .read_line(&mut url)
            .expect("reads the address");
        Server {
            child,
            url: url.trim().to_string(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
