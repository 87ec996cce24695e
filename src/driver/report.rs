//! What a finished job measured: the [`Report`] gathered over pes, as a table for the log and
//! as JSON for `--stats`.

use std::path::PathBuf;

use super::job::{Job, Report, Run};
use crate::config::json_str;
use crate::io::seq::Format;
use crate::io::Width;
use crate::plan;
use crate::stats::{summarise, PhaseSummary};
use crate::Ctx;

impl Report {
    /// What the job measured, gathered from every pe: its time since `run.t0`, the phases, each
    /// pe's peak memory and bytes sent; with pCSS' doubling rounds and the BWT's primary index
    /// from the build. Collective.
    pub(super) fn gather(
        ctx: &Ctx,
        run: &Run<'_>,
        refine_rounds: usize,
        bwt_primary: Option<u64>,
    ) -> Report {
        let comm = &ctx.comm;
        let total_secs = comm_max_f64(ctx, run.t0.elapsed().as_secs_f64());
        let phases = summarise(comm, &ctx.log);
        let peak_rss = comm.all_gather(ctx.log.run_peak_rss());
        let bytes_sent = comm.all_gather(comm.bytes_sent());
        let max_imbalance = comm_max_f64(ctx, ctx.log.max_imbalance());
        Report {
            n: run.n,
            width: run.width,
            total_secs,
            phases,
            peak_rss,
            bytes_sent,
            max_imbalance,
            refine_rounds,
            checked: run.job.check,
            plan: run.plan.clone(),
            bwt_primary,
        }
    }

    /// [`Self::bytes_per_char`] for people: "12.3 bytes/char", or "no characters".
    pub fn bytes_per_char_text(&self) -> String {
        match self.bytes_per_char() {
            Some(b) => format!("{b:.1} bytes/char"),
            None => "no characters".into(),
        }
    }

    /// Sum of peak resident memory over pes divided by n (None for an empty text).
    pub fn bytes_per_char(&self) -> Option<f64> {
        (self.n > 0).then(|| self.peak_rss.iter().sum::<u64>() as f64 / self.n as f64)
    }
}

/// The inputs for messages: 'a', or 'a' and 2 more files.
pub(super) fn shown_inputs(inputs: &[PathBuf]) -> String {
    match inputs {
        [one] => format!("'{}'", one.display()),
        [first, rest @ ..] => format!("'{}' and {} more files", first.display(), rest.len()),
        [] => "no input".into(),
    }
}

fn comm_max_f64(ctx: &Ctx, x: f64) -> f64 {
    ctx.comm.all_reduce_f64(&[x]).0[0]
}

/// The phases of a job over a text of `n` characters as a table's header and rows: max and mean
/// time over pes, bytes sent, the largest pe's peak and the sum of the pes' peaks per character.
pub(super) fn phase_rows(phases: &[PhaseSummary], n: usize) -> String {
    let mut s = format!(
        "{:<5} {:<18} {:>10} {:>10} {:>12} {:>12} {:>14}\n",
        "level", "phase", "max s", "mean s", "max MB sent", "max MB peak", "sum peak B/ch"
    );
    let n = n.max(1) as f64;
    for ph in phases {
        s.push_str(&format!(
            "{:<5} {:<18} {:>10.3} {:>10.3} {:>12.1} {:>12.1} {:>14.1}\n",
            ph.level,
            ph.name,
            ph.max_secs,
            ph.mean_secs,
            ph.max_bytes / 1e6,
            ph.max_peak_rss / 1e6,
            ph.sum_peak_rss / n
        ));
    }
    s
}

/// The report as a table for the log (Kulla–Sanders Table 1 style: max and mean over pes).
pub fn report_table(r: &Report) -> String {
    let mut s = phase_rows(&r.phases, r.n);
    let peak = r.peak_rss.iter().copied().max().unwrap_or(0);
    s.push_str(&format!(
        "total {:.3} s ({:.2} MB/s); peak RSS max {:.1} MB per pe, {} summed over pes; fullest pe {:.2}× mean",
        r.total_secs,
        r.n as f64 / 1e6 / r.total_secs.max(1e-9),
        peak as f64 / 1e6,
        r.bytes_per_char_text(),
        r.max_imbalance
    ));
    s.push_str(&format!(
        "\nmemory: measured peak {} on the fullest pe, planned {} (measured/planned {:.2}; {})",
        plan::size_text(peak),
        plan::size_text(r.plan.peak),
        peak as f64 / r.plan.peak.max(1) as f64,
        r.plan.budget.map_or("no budget".into(), |b| format!(
            "budget {}",
            plan::size_text(b)
        ))
    ));
    s
}

/// A path as JSON: a string, or null for none.
fn path_json(p: Option<&PathBuf>) -> String {
    p.map_or("null".into(), |p| json_str(&p.display().to_string()))
}

/// The report as JSON (for `--stats`), with every setting under `"config"` (the plan's knobs as
/// the run kept them: [`crate::Config::fields_with`]) and the job's own
/// (inputs and their formats, outputs, the width asked for) at the top.
pub fn report_json(r: &Report, ctx: &Ctx, job: &Job) -> String {
    let list = |v: &[u64]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{{\n  \"input\": {},\n  \"inputs\": [{}],\n  \"format\": {},\n  \"formats\": [{}],\n  \"keep_case\": {},\n  \"revcomp\": {},\n  \"token_width\": {},\n  \"output\": {},\n  \"bwt\": {},\n  \"lcp\": {},\n  \"width_asked\": {},\n  \"force\": {},\n  \"config\": {},\n  \"n\": {},\n  \"pes\": {},\n  \"threads_per_pe\": {},\n  \"algo\": {},\n  \"backend\": {},\n  \"width\": {},\n  \"checked\": {},\n  \"total_secs\": {:.6},\n  \"mb_per_sec\": {:.3},\n  \"peak_rss_bytes_per_pe\": [{}],\n  \"bytes_per_char\": {},\n  \"bytes_sent_per_pe\": [{}],\n  \"max_imbalance\": {:.4},\n  \"refine_rounds\": {},\n  \"bwt_primary\": {},\n  \"mem_per_pe\": {},\n  \"plan\": {},\n  \"planned_peak_bytes\": {},\n  \"measured_max_peak_bytes\": {},\n  \"measured_over_planned\": {:.4},\n  \"phases\": [\n{}\n  ]\n}}\n",
        json_str(&job.inputs.first().map(|p| p.display().to_string()).unwrap_or_default()),
        job.inputs
            .iter()
            .map(|p| json_str(&p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", "),
        job.seq.format.map_or("null".into(), |f| json_str(f.name())),
        job.inputs
            .iter()
            .map(|p| json_str(job.seq.format.unwrap_or_else(|| Format::from_name(p)).name()))
            .collect::<Vec<_>>()
            .join(", "),
        job.seq.keep_case,
        job.seq.revcomp,
        job.token_width.bytes(),
        path_json(job.write_sa.then_some(&job.output)),
        path_json(job.bwt.as_ref()),
        path_json(job.lcp.as_ref()),
        json_str(&match job.width {
            Width::Auto => "auto".to_string(),
            Width::Fixed(w) => w.to_string(),
        }),
        job.force,
        ctx.config.to_json_with(&r.plan.knobs),
        r.n,
        ctx.comm.size(),
        ctx.config.threads,
        json_str(r.plan.knobs.name()),
        json_str(ctx.sorter.name()),
        r.width,
        r.checked,
        r.total_secs,
        r.n as f64 / 1e6 / r.total_secs.max(1e-9),
        list(&r.peak_rss),
        r.bytes_per_char().map_or("null".into(), |b| format!("{b:.3}")),
        list(&r.bytes_sent),
        r.max_imbalance,
        r.refine_rounds,
        r.bwt_primary.map_or("null".into(), |p| p.to_string()),
        r.plan.budget.map_or("null".into(), |b| b.to_string()),
        r.plan.to_json(),
        r.plan.peak,
        r.peak_rss.iter().copied().max().unwrap_or(0),
        r.peak_rss.iter().copied().max().unwrap_or(0) as f64 / r.plan.peak.max(1) as f64,
        phases_json(&r.phases)
    )
}

/// The phases as the lines of a JSON array (for `--stats`), one object a phase.
pub(super) fn phases_json(phases: &[PhaseSummary]) -> String {
    let lines: Vec<String> = phases
        .iter()
        .map(|ph| {
            format!(
                "    {{\"level\": {}, \"name\": {}, \"max_secs\": {:.6}, \"mean_secs\": {:.6}, \"mean_a2a_secs\": {:.6}, \"max_bytes_sent\": {}, \"total_bytes_sent\": {}, \"max_peak_rss\": {}, \"sum_peak_rss\": {}}}",
                ph.level,
                json_str(&ph.name),
                ph.max_secs,
                ph.mean_secs,
                ph.mean_a2a_secs,
                ph.max_bytes as u64,
                ph.total_bytes as u64,
                ph.max_peak_rss as u64,
                ph.sum_peak_rss as u64
            )
        })
        .collect();
    lines.join(",\n")
}
