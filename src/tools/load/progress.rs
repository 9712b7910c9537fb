//! The progress bar of `muster load` on a terminal (pods bound of planned,
//! with pods created and gang outcomes beside it); progress lines when
//! stderr is not a terminal, so logs of CI runs stay readable.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::runner::{Counts, Lines, Progress};

const TEMPLATE: &str = "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} pods bound {msg}";

/// A bar on an interactive stderr, else progress lines on it.
pub fn for_stderr<'a>(
    total: usize,
    stderr: &'a mut (dyn std::io::Write + Send),
) -> Box<dyn Progress + Send + 'a> {
    if std::io::stderr().is_terminal() {
        Box::new(Bar::new(total))
    } else {
        Box::new(Lines::new(stderr))
    }
}

/// An `indicatif` bar: position = pods bound.
pub struct Bar(ProgressBar);

impl Bar {
    pub fn new(total: usize) -> Bar {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Bar(bar)
    }
}

impl Progress for Bar {
    fn update(&mut self, _at: Duration, c: &Counts, done: bool) {
        self.0.set_position(c.pods_bound as u64);
        self.0.set_message(format!(
            "| {} created | gangs {} bound, {} waiting, {} timed out",
            c.pods_created, c.gangs_bound, c.gangs_waiting, c.gangs_timed_out
        ));
        if done {
            self.0.finish();
        }
    }
}
