//! The GitHub Action's script (`python/mooncake_wire/review.sh`), run locally as the action runs it: on two release
//! trees of the real wheels 0.32.0 and 0.33.0 (when cached, else `SKIPPED`) and on a git repository whose two
//! commits hold the declarations of those revisions (always), the report's rows must be the committed
//! `schema/push/diff/vllm-0.32.0__vllm-0.33.0.md` rows, the check must fail unless the break is announced, and a
//! commit that touches no connector file must say so and pass. Needs `bash`, `git`, `tar` and `python3`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::extract_src::{envs_py, python_behaviour, python_source, TempDir};
use mooncake_conformance::extract::{self, proof};
use mooncake_wire::spec::Spec;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tools_ok() -> bool {
    for t in ["bash", "git", "tar", &extract::default_python()] {
        if Command::new(t).arg("--version").output().is_err() {
            println!("SKIPPED: review.sh tests — no `{t}`");
            return false;
        }
    }
    true
}

fn review(args: &[&str], dir: Option<&Path>) -> (Output, String) {
    let d = TempDir::new("report");
    let out = d.0.join("report.md");
    let mut c = Command::new("bash");
    c.arg(root().join("python/mooncake_wire/review.sh")).args(["--bin", env!("CARGO_BIN_EXE_mooncake-conformance")]);
    c.args(args).arg("--out").arg(&out);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    let o = c.output().unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    (o, text)
}

/// The classified rows of a diff report (`| n | Where | Change | … |`), which name no revision.
fn rows(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("| ") && l[2..].starts_with(|c: char| c.is_ascii_digit()))
        .map(String::from)
        .collect()
}

fn committed_rows() -> Vec<String> {
    let md = std::fs::read_to_string(root().join("schema/push/diff/vllm-0.32.0__vllm-0.33.0.md")).unwrap();
    let r = rows(&md);
    assert!(!r.is_empty());
    r
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_pull_request_in_git_gets_the_committed_classification() {
    let Some(_) = crate::in_repository(
        "python/mooncake_wire/review.sh",
        "extract_review::a_pull_request_in_git_gets_the_committed_classification",
    ) else {
        return;
    };
    if !tools_ok() {
        return;
    }
    let spec = Spec::builtin();
    let repo = TempDir::new("repo");
    let file = repo.0.join("vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    git(&repo.0, &["init", "-q"]);
    // The connector's declarations and what it sends and reads; vllm/envs.py declares the variables.
    let write = |rev: &str| {
        let r = spec.revision(rev).unwrap();
        std::fs::write(&file, format!("{}\n{}", python_source(r), python_behaviour(r))).unwrap();
        std::fs::write(repo.0.join("vllm/envs.py"), envs_py(r)).unwrap();
    };
    write("vllm-0.32.0");
    std::fs::write(repo.0.join("README.md"), "x\n").unwrap();
    git(&repo.0, &["add", "-A"]);
    git(&repo.0, &["commit", "-qm", "base"]);
    write("vllm-0.33.0");
    git(&repo.0, &["commit", "-qam", "the pull request"]);

    let (o, md) = review(&["--old-ref", "HEAD~1", "--new", "."], Some(&repo.0));
    assert_eq!(
        o.status.code(),
        Some(1),
        "unannounced break fails the check: {}\n{md}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(md.starts_with("<!-- mooncake-wire-review -->") && md.contains("is not announced"), "{md}");
    assert_eq!(rows(&md), committed_rows(), "{md}");
    let (o, md) = review(&["--old-ref", "HEAD~1", "--new", ".", "--announced"], Some(&repo.0));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(md.contains("announces it"), "{md}");

    // A commit that touches no connector file: nothing extracted, the check passes.
    std::fs::write(repo.0.join("README.md"), "y\n").unwrap();
    git(&repo.0, &["commit", "-qam", "docs"]);
    let (o, md) = review(&["--old-ref", "HEAD~1", "--new", "."], Some(&repo.0));
    assert_eq!(o.status.code(), Some(0));
    assert!(md.contains("No file under") && rows(&md).is_empty(), "{md}");
    // Bad usage.
    let (o, _) = review(&["--new", "."], Some(&repo.0));
    assert_eq!(o.status.code(), Some(2));
    let (o, _) = review(&["--old-ref", "no-such-ref", "--new", "."], Some(&repo.0));
    assert_eq!(o.status.code(), Some(2));
}

/// `vllm/distributed/kv_transfer/`, `vllm/_version.py` and `vllm/envs.py` of a wheel, as a release tree.
fn release_tree(wheel: &Path, into: &Path) {
    let s = Command::new(extract::default_python())
        .args([
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in z.namelist():\n    if n.startswith('vllm/distributed/kv_transfer/') or n in ('vllm/_version.py', 'vllm/envs.py'):\n        z.extract(n, sys.argv[2])\n",
        ])
        .arg(wheel)
        .arg(into)
        .status()
        .unwrap();
    assert!(s.success());
}

#[test]
fn two_release_trees_get_the_committed_classification() {
    let Some(_) = crate::in_repository(
        "python/mooncake_wire/review.sh",
        "extract_review::two_release_trees_get_the_committed_classification",
    ) else {
        return;
    };
    if !tools_ok() {
        return;
    }
    let cache = proof::cache_dir();
    let wheels = proof::cached_wheels(&cache);
    let find =
        |r: &str| wheels.iter().find(|w| w.file_name().unwrap().to_string_lossy().starts_with(&format!("vllm-{r}-")));
    let (Some(a), Some(b)) = (find("0.32.0"), find("0.33.0")) else {
        println!(
            "SKIPPED: review.sh on the 0.32.0 and 0.33.0 release trees — their wheels are not both in {}",
            cache.display()
        );
        return;
    };
    let d = TempDir::new("trees");
    let (old, new) = (d.0.join("0.32.0"), d.0.join("0.33.0"));
    release_tree(a, &old);
    release_tree(b, &new);
    let (o, md) = review(&["--old", old.to_str().unwrap(), "--new", new.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1), "{}\n{md}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(rows(&md), committed_rows(), "{md}");
    assert!(
        md.contains("closest bundled revision vllm-0.32.0, 0 edits")
            && md.contains("closest bundled revision vllm-0.33.0, 0 edits"),
        "{md}"
    );
}
