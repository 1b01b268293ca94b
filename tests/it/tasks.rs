//! Tasks (seed 002): summaries read as the seed reads them, and more.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use proptest::prelude::*;

use crate::support::shared_dir;

/// Seed 002's `_extract_key_deliverables_from_summary`, cut out of the seed's text and
/// run by python3 as written, one summary per line of JSON in, its list out.
struct SeedParser {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl SeedParser {
    fn start() -> SeedParser {
        let seed = std::fs::read_dir(shared_dir().join("seeds"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("002_"))
            .expect("seed 002");
        let text = std::fs::read_to_string(seed).unwrap();
        let start = text
            .find("def _extract_key_deliverables_from_summary")
            .expect("the seed's parser");
        let end = start + text[start..].find("\ndef ").expect("the function's end");
        // A method in the seed: dedented as it is, called with no `self`.
        let function = &text[start..end];
        let program = format!(
            "import json, sys\n{function}\n\
             for line in sys.stdin:\n\
             \x20   print(json.dumps(_extract_key_deliverables_from_summary(None, json.loads(line))), flush=True)\n"
        );
        let mut child = Command::new("python3")
            .args(["-c", &program])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        SeedParser {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            _child: child,
        }
    }

    fn deliverables(&mut self, summary: &str) -> Vec<String> {
        writeln!(self.input, "{}", serde_json::to_string(summary).unwrap()).unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).expect("the seed's answer")
    }
}

/// Seed 002's section headings, in its order.
const SECTIONS: [&str; 6] = [
    "Objective",
    "Accomplishments",
    "Key Deliverables",
    "Test Results",
    "Important Notes",
    "Status",
];

/// A summary as an agent following seed 002's template writes it: its sections in
/// any order, some missing, list items of text and paths.
fn summary() -> impl Strategy<Value = (String, Vec<String>, bool)> {
    let word = "[A-Za-z0-9][A-Za-z0-9 .,/]{0,20}";
    let path = "[a-z][a-z0-9_/]{0,12}\\.[a-z]{1,3}";
    (
        Just(SECTIONS.to_vec()).prop_shuffle(),
        0usize..6,
        proptest::collection::vec((path, proptest::option::of(word)), 0..7),
        proptest::collection::vec(word, 0..4),
        any::<bool>(),
    )
        .prop_map(|(order, drop, files, words, heading_case)| {
            let mut text = String::from("# Task Completion Summary\n\n");
            let mut last = false;
            let shown: Vec<&str> = order
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, s)| *i != drop || *s == "Key Deliverables")
                .map(|(_, s)| s)
                .collect();
            for (i, section) in shown.iter().enumerate() {
                let title = if heading_case && *section == "Key Deliverables" {
                    "key deliverables".to_string()
                } else {
                    section.to_string()
                };
                text.push_str(&format!("## {title}\n"));
                if *section == "Key Deliverables" {
                    last = i == shown.len() - 1;
                    for (f, about) in &files {
                        match about {
                            Some(a) => text.push_str(&format!("- `{f}` - {a}\n")),
                            None => text.push_str(&format!("- `{f}`\n")),
                        }
                    }
                } else {
                    for w in &words {
                        text.push_str(&format!("- {w}\n"));
                    }
                }
                text.push('\n');
            }
            let paths = files.into_iter().map(|(f, _)| f).collect();
            (text, paths, last)
        })
}

/// Ours and the seed's own parser agree on every summary the template makes, but
/// where the Key Deliverables section is the last one: the seed's regex needs a
/// `##` after it and finds nothing; ours reads to the end of the file.
#[test]
fn deliverables_are_read_as_the_seeds_own_parser_reads_them() {
    let seed = Mutex::new(SeedParser::start());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    let missed_by_the_seed = std::cell::Cell::new(0);
    runner
        .run(&summary(), |(text, paths, last)| {
            let ours: Vec<String> = hitl::tasks::summary::parse(&text)
                .deliverables
                .into_iter()
                .map(|d| d.path)
                .collect();
            let theirs = seed.lock().unwrap().deliverables(&text);
            prop_assert_eq!(&ours, &paths, "ours, on\n{}", text);
            if last && !paths.is_empty() {
                prop_assert_eq!(
                    theirs,
                    Vec::<String>::new(),
                    "the seed's, last, on\n{}",
                    text
                );
                missed_by_the_seed.set(missed_by_the_seed.get() + 1);
            } else {
                prop_assert_eq!(&theirs, &paths, "the seed's, on\n{}", text);
            }
            Ok(())
        })
        .unwrap();
    assert!(
        missed_by_the_seed.get() > 0,
        "the last-section case was never made"
    );
}
