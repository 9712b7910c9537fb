//! What a process cost during a run: peak resident memory and CPU seconds,
//! read from `/proc/<pid>` when the process is on this machine, or from the
//! process's Prometheus `/metrics` otherwise (RSS sampled, so the peak is a
//! lower bound there). The scheduler's `/metrics` also gives its scheduling
//! attempts. A scheduler serving securely (`muster run`'s default) is
//! scraped over https with a bearer token ([`Access`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;

/// Linux reports CPU time in clock ticks of 1/100 s (USER_HZ) on every
/// architecture Muster builds for.
const TICKS_PER_SECOND: f64 = 100.0;
/// How long a scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    /// Peak RSS so far (`VmHWM`) from /proc, or current RSS from /metrics.
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
    /// `scheduler_schedule_attempts_total`, summed over results (metrics only).
    pub attempts: Option<f64>,
    /// `muster_informer_relists_total`, summed over informers (metrics only).
    pub relists: Option<f64>,
}

/// Where readings come from.
#[derive(Debug, Clone)]
pub enum Source {
    Proc(u32),
    /// One client for every scrape, so the connection is reused; the
    /// `Authorization` header value, if any.
    Metrics(hyper::Uri, Box<HttpClient>, Option<String>),
}

type HttpClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Empty<Bytes>,
>;

/// How an https metrics URL is reached: `--scheduler-token-file` and
/// `--scheduler-ca-file`.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
}

/// What a process cost between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub peak_rss_bytes: u64,
    pub cpu_seconds: f64,
    /// `proc` or `metrics`.
    pub source: &'static str,
}

impl Source {
    /// `--scheduler-metrics` value: an http URL (a scheduler run with
    /// `--insecure-serving`).
    pub fn metrics(url: &str) -> Result<Source> {
        Source::metrics_with(url, &Access::default())
    }

    /// An http or https URL; https with a bearer token from `access`.
    pub fn metrics_with(url: &str, access: &Access) -> Result<Source> {
        let uri: hyper::Uri = url
            .parse()
            .with_context(|| format!("--scheduler-metrics {url:?} is not a URL"))?;
        match uri.scheme_str() {
            Some("http") if access.token_file.is_some() => {
                bail!(
                    "--scheduler-token-file needs an https:// --scheduler-metrics (a token is not sent in the clear)"
                )
            }
            Some("http" | "https") => {}
            _ => bail!("--scheduler-metrics {url:?}: only http:// and https:// URLs are supported"),
        }
        let tls = muster_scheduler::server::tls::client_config(access.ca_file.as_deref())
            .context("--scheduler-ca-file")?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let authorization = match &access.token_file {
            Some(path) => {
                let token = std::fs::read_to_string(path).with_context(|| {
                    format!("reading --scheduler-token-file {}", path.display())
                })?;
                let token = token.trim();
                if token.is_empty() {
                    bail!("--scheduler-token-file {} is empty", path.display());
                }
                Some(format!("Bearer {token}"))
            }
            None => None,
        };
        Ok(Source::Metrics(uri, Box::new(client), authorization))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Source::Proc(_) => "proc",
            Source::Metrics(..) => "metrics",
        }
    }

    pub async fn read(&self) -> Result<Reading> {
        match self {
            Source::Proc(pid) => read_proc(*pid),
            Source::Metrics(uri, client, auth) => {
                Ok(parse_metrics(&scrape(client, uri, auth.as_deref()).await?))
            }
        }
    }
}

/// Usage between `first` and the highest of `samples` (taken after it).
pub fn usage(source: &Source, first: Reading, samples: &[Reading]) -> Usage {
    let last = samples.last().copied().unwrap_or(first);
    Usage {
        peak_rss_bytes: samples
            .iter()
            .map(|r| r.rss_bytes)
            .chain([first.rss_bytes])
            .max()
            .unwrap_or(0),
        cpu_seconds: (last.cpu_seconds - first.cpu_seconds).max(0.0),
        source: source.name(),
    }
}

/// Peak RSS (`VmHWM`) and user+system CPU of a local process.
pub fn read_proc(pid: u32) -> Result<Reading> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (is process {pid} running?)"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    Ok(Reading {
        rss_bytes: vm_hwm_bytes(&status)
            .with_context(|| format!("/proc/{pid}/status has no VmHWM line"))?,
        cpu_seconds: cpu_seconds(&stat)
            .with_context(|| format!("/proc/{pid}/stat is not in the expected format"))?,
        attempts: None,
        relists: None,
    })
}

fn vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// utime + stime from `/proc/<pid>/stat` (fields 14 and 15; the command
/// name in field 2 may contain spaces, so count from its closing paren).
fn cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3 (state).
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

async fn scrape(client: &HttpClient, uri: &hyper::Uri, auth: Option<&str>) -> Result<String> {
    let fetch = async {
        let mut request = hyper::Request::get(uri.clone());
        if let Some(value) = auth {
            request = request.header(hyper::header::AUTHORIZATION, value);
        }
        let request = request
            .body(Empty::new())
            .with_context(|| format!("building the request for {uri}"))?;
        let response = client
            .request(request)
            .await
            .with_context(|| format!("scraping {uri}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("reading {uri}"))?
            .to_bytes();
        if !status.is_success() {
            bail!("scraping {uri}: HTTP {status}");
        }
        String::from_utf8(body.to_vec()).with_context(|| format!("{uri} is not UTF-8 text"))
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .with_context(|| format!("scraping {uri}: no answer within 5s"))?
}

/// The process and scheduling figures in a Prometheus text exposition (a
/// counter with no series yet counts as 0).
pub fn parse_metrics(text: &str) -> Reading {
    let mut reading = Reading {
        attempts: Some(0.0),
        relists: Some(0.0),
        ..Reading::default()
    };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        match name {
            "process_resident_memory_bytes" => reading.rss_bytes = value as u64,
            "process_cpu_seconds_total" => reading.cpu_seconds = value,
            "scheduler_schedule_attempts_total" => {
                *reading.attempts.get_or_insert(0.0) += value;
            }
            "muster_informer_relists_total" => {
                *reading.relists.get_or_insert(0.0) += value;
            }
            _ => {}
        }
    }
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_from_proc() {
        let r = read_proc(std::process::id()).unwrap();
        assert!(r.rss_bytes > 1 << 20, "{r:?}");
        let e = read_proc(u32::MAX).unwrap_err();
        assert!(
            format!("{e:#}").contains("is process 4294967295 running?"),
            "{e:#}"
        );
    }

    #[test]
    fn stat_fields_count_from_the_command_name() {
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 2 3";
        assert_eq!(cpu_seconds(stat), Some(3.0));
    }

    #[test]
    fn parses_the_exposition() {
        let text = "# HELP x\nprocess_resident_memory_bytes 1.5e8\nprocess_cpu_seconds_total 12.5\n\
            scheduler_schedule_attempts_total{profile=\"all\",result=\"scheduled\"} 90\n\
            scheduler_schedule_attempts_total{profile=\"all\",result=\"unschedulable\"} 10\n\
            muster_informer_relists_total{informer=\"pods\"} 2\n\
            muster_informer_relists_total{informer=\"nodes\"} 1\nbogus\n";
        let r = parse_metrics(text);
        assert_eq!(r.rss_bytes, 150_000_000);
        assert_eq!(r.cpu_seconds, 12.5);
        assert_eq!(r.attempts, Some(100.0));
        assert_eq!(r.relists, Some(3.0));
        assert_eq!(parse_metrics("").attempts, Some(0.0));
        assert_eq!(parse_metrics("").relists, Some(0.0));
    }

    #[test]
    fn usage_takes_the_peak_and_the_cpu_difference() {
        let at = |rss, cpu| Reading {
            rss_bytes: rss,
            cpu_seconds: cpu,
            attempts: None,
            relists: None,
        };
        let u = usage(&Source::Proc(1), at(10, 1.0), &[at(30, 2.0), at(20, 4.5)]);
        assert_eq!(
            (u.peak_rss_bytes, u.cpu_seconds, u.source),
            (30, 3.5, "proc")
        );
        assert!(Source::metrics("ftp://x/metrics").is_err());
        assert!(Source::metrics("https://x/metrics").is_ok());
        assert!(Source::metrics("http://127.0.0.1:1/metrics").is_ok());
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "abc\n").unwrap();
        let access = Access {
            token_file: Some(token),
            ca_file: None,
        };
        let err = Source::metrics_with("http://x/metrics", &access).unwrap_err();
        assert!(err.to_string().contains("in the clear"), "{err}");
        match Source::metrics_with("https://x/metrics", &access).unwrap() {
            Source::Metrics(_, _, auth) => assert_eq!(auth.as_deref(), Some("Bearer abc")),
            other => panic!("{other:?}"),
        }
    }
}
