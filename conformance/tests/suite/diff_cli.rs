//! `mooncake-conformance diff` end to end: where each side comes from (revision, release, file, directory,
//! git:REF), the three output formats, and the exit codes (0 / 1 on a breaking change / 2 usage).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
}
fn spec_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec")
}
fn run(args: &[&str], cwd: Option<&Path>) -> Output {
    let mut c = bin();
    c.args(args);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    c.output().unwrap()
}
fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}
fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mooncake-diff-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for p in mooncake_trace::walk::entries(from).unwrap_or_else(|e| panic!("{e}")) {
        let name = p.file_name().expect("a directory entry has a name");
        if p.is_dir() {
            copy_dir(&p, &to.join(name));
        } else {
            std::fs::copy(&p, to.join(name)).unwrap();
        }
    }
}

/// A proposed vLLM 0.35.0 revision that adds a required field to the request.
const PROPOSED: &str = r#"format = "mooncake-wire-spec/2"
family = "push"
revision = "vllm-0.35.0"
base = "vllm-0.34.0"
generation = 2
releases = ["0.35.0"]
source = "a proposal"
summary = "+ required remote_dp_rank"

[[edit]]
op = "insert"
at = "structs.MooncakeXferMetadata.fields"
after = "remote_tp_rank"
item = { name = "remote_dp_rank", type = "int", doc = "Decoder DP rank." }
"#;

#[test]
fn exit_codes_follow_breaking_changes() {
    let o = run(&["diff", "vllm-0.32.0", "vllm-0.33.0"], None);
    assert_eq!(o.status.code(), Some(1), "LAYOUT_MISS breaks when sent");
    assert!(stdout(&o).contains("| `MooncakeXferResponseStatus.LAYOUT_MISS` |"), "{}", stdout(&o));
    assert_eq!(run(&["diff", "--allow-breaking", "vllm-0.32.0", "vllm-0.33.0"], None).status.code(), Some(0));
    assert_eq!(run(&["diff", "vllm-0.30.0", "vllm-0.30.0"], None).status.code(), Some(0), "a revision against itself");
    let o = run(&["diff", "vllm-0.29.0", "vllm-0.30.0"], None);
    assert_eq!(o.status.code(), Some(1), "0.30.0 skips layers across PP sizes");
    assert!(stdout(&o).contains("`behaviour.region_alignment`"), "{}", stdout(&o));
    let o = run(&["diff", "vllm-0.32.0", "no-such-revision"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-revision"));
}

#[test]
fn formats() {
    let o = run(&["diff", "--format", "summary", "0.19.1", "0.20.0"], None);
    let line = stdout(&o);
    assert_eq!(line.lines().count(), 1);
    assert_eq!(line.trim(), "vllm-0.19.0..0.19.1 → vllm-0.20.0..0.23.0: 3 changes — 1 breaks always, 1 breaks only when sent, 0 to review, 1 compatible; unchanged messages keep their bytes.");
    let o = run(&["diff", "--format", "json", "vllm-0.16.0..0.18.1", "vllm-0.19.0..0.19.1"], None);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["counts"]["breaks"], 2, "block_lens, and equal_length_fields naming it");
    let c =
        j["changes"].as_array().unwrap().iter().find(|c| c["subject"] == "MooncakeXferMetadata.block_lens").unwrap();
    assert_eq!(c["new_reads_old"]["effect"], "breaks");
    assert_eq!(c["new_reads_old"]["example"], "Object missing required field `block_lens`");
    assert_eq!(c["old_reads_new"]["effect"], "compatible");
    assert_eq!(c["confirmed"], true);
}

#[test]
fn a_spec_file_a_directory_and_a_proposal() {
    let Some(_) = crate::in_repository("spec", "diff_cli::a_spec_file_a_directory_and_a_proposal") else { return };
    // The built-in file resolves with its siblings: same report as by name.
    let by_name = stdout(&run(&["diff", "vllm-0.33.0", "vllm-0.34.0"], None));
    let file = spec_dir().join("push/vllm-0.34.0.toml");
    let by_file = stdout(&run(&["diff", "vllm-0.33.0", file.to_str().unwrap()], None));
    assert_eq!(by_name, by_file);
    let dir = spec_dir();
    assert_eq!(
        stdout(&run(&["diff", "vllm-0.33.0", dir.to_str().unwrap()], None)),
        by_name,
        "a directory means its newest revision"
    );
    let pick = format!("{}#vllm-0.32.0", dir.display());
    assert_eq!(run(&["diff", &pick, "vllm-0.32.0"], None).status.code(), Some(0));

    // A proposal alone in a directory: its base comes from the built-in spec.
    let t = tempdir("proposal");
    let p = t.join("vllm-0.35.0.toml");
    std::fs::write(&p, PROPOSED).unwrap();
    let o = run(&["diff", "vllm-0.34.0", p.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1));
    let md = stdout(&o);
    assert!(
        md.contains("`MooncakeXferMetadata.remote_dp_rank`")
            && md.contains("Object missing required field `remote_dp_rank`"),
        "{md}"
    );
    // One more declared field: 16, so the map header changes for every request.
    assert!(md.contains("| `MooncakeXferMetadata` | map header: 15 → 16 declared map entries |"), "{md}");
    // Given relative to the current directory.
    let o = run(&["diff", "vllm-0.34.0", "vllm-0.35.0.toml"], Some(&t));
    assert_eq!(stdout(&o), md, "{}", String::from_utf8_lossy(&o.stderr));

    // The same proposal next to a copy of spec/push: the directory's newest revision is the proposal.
    let copy = tempdir("copy");
    copy_dir(&spec_dir(), &copy);
    std::fs::write(copy.join("push/vllm-0.35.0.toml"), PROPOSED).unwrap();
    assert_eq!(stdout(&run(&["diff", "vllm-0.34.0", copy.to_str().unwrap()], None)), md);
    let _ = std::fs::remove_dir_all(&t);
    let _ = std::fs::remove_dir_all(&copy);
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn git_revisions_of_this_repository() {
    let Some(_) = crate::in_repository(".git", "diff_cli::git_revisions_of_this_repository") else { return };
    let repo = tempdir("git");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "test"]);
    copy_dir(&spec_dir(), &repo.join("spec"));
    git(&repo, &["add", "spec"]);
    git(&repo, &["commit", "-q", "-m", "spec"]);
    std::fs::write(repo.join("spec/push/vllm-0.35.0.toml"), PROPOSED).unwrap();

    let o = run(&["diff", "git:main", "spec"], Some(&repo));
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("## Wire diff: `vllm-0.34.0` → `vllm-0.35.0`"));
    let o = run(&["diff", "--format", "summary", "git:main#vllm-0.24.0", "git:HEAD#vllm-0.25.0..0.25.1"], Some(&repo));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).starts_with("vllm-0.24.0 → vllm-0.25.0..0.25.1: ") && stdout(&o).contains(" 2 break always"),
        "{}",
        stdout(&o)
    );
    let o = run(&["diff", "git:no-such-branch", "spec"], Some(&repo));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such commit"));
    let _ = std::fs::remove_dir_all(&repo);
}

/// `diff --spec-changes` (the CI step of scripts/test.sh) in a scratch repository: silent without history, without a
/// main branch or without a change; prints the report when spec/ changed; fails only on a real error.
#[test]
fn spec_changes_are_reported_only_when_the_spec_changed() {
    let Some(_) = crate::in_repository(".git", "diff_cli::spec_changes_are_reported_only_when_the_spec_changed") else {
        return;
    };
    let repo = tempdir("ci");
    copy_dir(&spec_dir(), &repo.join("spec"));
    let script = |repo: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
            .args(["diff", "--spec-changes"])
            .current_dir(repo)
            .output()
            .unwrap();
        (o.status.code(), stdout(&o), String::from_utf8_lossy(&o.stderr).to_string())
    };
    git(&repo, &["init", "-q", "-b", "work"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "test"]);
    let (code, out, _) = script(&repo);
    assert_eq!((code, out.contains("no git history")), (Some(0), true), "{out}");
    git(&repo, &["add", "spec"]);
    git(&repo, &["commit", "-q", "-m", "spec"]);
    let (code, out, _) = script(&repo);
    assert_eq!((code, out.contains("no main branch")), (Some(0), true), "{out}");
    git(&repo, &["branch", "main"]);
    let (code, out, _) = script(&repo);
    assert_eq!((code, out.contains("unchanged")), (Some(0), true), "{out}");

    std::fs::write(repo.join("spec/push/vllm-0.35.0.toml"), PROPOSED).unwrap();
    let (code, out, err) = script(&repo);
    assert_eq!(code, Some(0), "a breaking change is reported, not failed: {out}{err}");
    assert!(
        out.contains("## Wire diff: `vllm-0.34.0` → `vllm-0.35.0`")
            && out.contains("Object missing required field `remote_dp_rank`"),
        "{out}"
    );

    // An edit of an existing revision is diffed against that revision on main.
    git(&repo, &["add", "spec"]);
    git(&repo, &["commit", "-q", "-m", "0.35.0"]);
    git(&repo, &["branch", "-f", "main", "HEAD"]);
    let p = repo.join("spec/push/vllm-0.29.0.toml");
    let t = std::fs::read_to_string(&p).unwrap().replace("value = \"LBHNC\"", "value = \"HND\"");
    std::fs::write(&p, t).unwrap();
    let (code, out, _) = script(&repo);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("## Wire diff: `vllm-0.29.0` → `vllm-0.29.0`") && out.contains("`behaviour.required_kv_layout`"),
        "{out}"
    );
    assert!(!out.contains("vllm-0.34.0` → `vllm-0.35.0"), "files unchanged since main are not reported again: {out}");

    // A spec that does not load is a real error.
    std::fs::write(&p, "format = \"mooncake-wire-spec/2\"\nrevision = 3\n").unwrap();
    let (code, _, err) = script(&repo);
    assert_ne!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&repo);
}
