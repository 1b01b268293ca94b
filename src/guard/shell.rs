//! A shell command line read as bash reads it, down to the simple commands that
//! would run.
//!
//! The guard judges what a line *does*, so it must see what bash would run, not
//! the text: `\rm`, `"rm"`, `/bin/rm` and `$(echo rm)`'s neighbours all run `rm`.
//! brush-parser (the parser of the brush shell) reads the grammar: lists,
//! pipelines, `if`/`for`/`while`/`case`, subshells, functions, here-documents;
//! this module walks what it read as a shell would, keeping what can be known
//! without running anything:
//!
//! - every simple command, wherever it sits (inside `$(…)`, backticks, `<(…)`,
//!   `${x:-$(…)}`, function bodies, `bash -c '…'`, `eval`, `su -c`, `watch`),
//!   with its words after quote removal;
//! - `~`, `$HOME`, `$PWD` and variables the line itself set (`H=.helpers`)
//!   expanded; anything else a word depends on is marked unknown, never guessed;
//! - the folder each command runs in, following `cd`, `pushd` and `env -C`;
//! - where its input comes from: a download (`curl … |`), a here-document's text;
//! - wrappers taken off (`sudo -u root`, `env -i X=1`, `nice`, `timeout 9`,
//!   `xargs`, `find -exec`, `busybox`…) by [`Command::programs`].
//!
//! A line it cannot read is an error: the caller asks, never waves it through.

use std::{
    collections::HashMap,
    path::{Component, Path, PathBuf},
};

use brush_parser::{
    ParserOptions, ast,
    word::{self, Parameter, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource},
};

/// How deep nested lines are followed (`bash -c "$(… eval '…')"`); deeper is
/// unreadable.
const MAX_DEPTH: usize = 12;

/// The longest line read: a longer one is unreadable (a here-document of a big file
/// fits; parsing is linear, about 0.5 µs a byte).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Shells: a `-c` string is a line of their own, and without a script they run
/// their input.
pub const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "yash",
    "fish",
    "busybox-sh",
];

/// Programs that run code given as text, from a file or from their input.
pub const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "deno", "bun",
    "tclsh", "Rscript", "pwsh",
];

/// Programs that fetch from the network to their output.
pub const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch", "http", "https", "xh", "aria2c"];

/// A word as the command receives it, as far as it is known before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The text, quotes and escapes removed, known expansions made; what is unknown
    /// is kept as written (`$X`, `$(…)`).
    pub text: String,
    /// Part of it is known only when it runs (a variable the line did not set, a
    /// command's output, arithmetic, a process substitution's `/dev/fd/N`).
    pub unknown: bool,
    /// It has unquoted glob or brace characters: it may stand for several names.
    pub glob: bool,
    /// Part of it is what a download printed (`"$(curl …)"`, `<(wget -O- …)`).
    pub downloaded: bool,
}

impl Word {
    /// A word known in full.
    pub fn known(text: impl Into<String>) -> Word {
        Word {
            text: text.into(),
            ..Word::default()
        }
    }

    /// A word known only when it runs, shown as `shown`.
    pub fn unknown(shown: impl Into<String>) -> Word {
        Word {
            text: shown.into(),
            unknown: true,
            ..Word::default()
        }
    }

    /// Whether it is known in full and names one thing.
    pub fn is_plain(&self) -> bool {
        !self.unknown && !self.glob
    }
}

/// What a redirection does with its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `<`
    Read,
    /// `>`, `>|`, `&>`, `>>`, `&>>`, `<>`: the file is written (created, truncated
    /// or appended to).
    Write,
}

/// A redirection to or from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Reads or writes.
    pub kind: RedirectKind,
    /// The file.
    pub target: Word,
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Input {
    /// What a download printed reaches it (`curl … | sh`, `sh < <(curl …)`).
    pub downloaded: bool,
    /// Its text, when the line holds it (a here-document, a here-string, `echo …
    /// |`).
    pub text: Option<String>,
    /// It reads the items of an earlier command's output (`… | xargs`), or a file.
    pub piped: bool,
}

/// One simple command of the line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// Its words: the program and its arguments, as written (wrappers included).
    pub words: Vec<Word>,
    /// Its redirections to and from files.
    pub redirects: Vec<Redirect>,
    /// Its standard input.
    pub input: Input,
    /// The folder it runs in; `None` when that is known only when it runs.
    pub cwd: Option<PathBuf>,
}

/// The program a command runs once its wrappers are taken off, and what it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Its name, without the folder (`/bin/rm` is `rm`); empty when unknown.
    pub name: String,
    /// Its arguments.
    pub args: Vec<Word>,
    /// The folder it runs in (a wrapper may change it: `env -C`).
    pub cwd: Option<PathBuf>,
    /// Its input (`xargs` hands it items it reads, as arguments).
    pub input: Input,
    /// The wrappers taken off to reach it, outermost first (`sudo`, `env`, `xargs`).
    pub wrappers: Vec<String>,
    /// Variables the wrappers set for it (`env PATH=… cmd`, `sudo X=1 cmd`).
    pub env: Vec<String>,
    /// The folders it and its wrappers were named in (`./scripts` of
    /// `./scripts/test.sh`), as written; empty when every one is found on the PATH.
    pub folders: Vec<PathBuf>,
}

impl Program {
    /// Its words as one line, wrappers taken off, for the human and for rules.
    pub fn shown(&self) -> String {
        let mut out = self.name.clone();
        for a in &self.args {
            out.push(' ');
            out.push_str(&shown_word(&a.text));
        }
        out
    }
}

/// A word quoted for showing when it would not read back as one word.
pub fn shown_word(text: &str) -> String {
    if !text.is_empty()
        && !text
            .chars()
            .any(|c| c.is_whitespace() || "'\"`;&|<>()\\".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What a line holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Line {
    /// Every simple command, in the order met (nested ones after their parent's
    /// words were read).
    pub commands: Vec<Command>,
    /// Functions whose body calls the function again in a pipeline or in the
    /// background (`:(){ :|:& };:`).
    pub fork_bombs: Vec<String>,
    /// Every variable the line sets (`X=1`, `X=1 cmd`, `export X=1`, `for X in`):
    /// some change what later commands run (`PATH`, `LD_PRELOAD`, `GIT_SSH_COMMAND`).
    pub assigned: Vec<String>,
}

/// Why a line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads `line` as bash would, run in `cwd` by a user whose home is `home`.
///
/// The parser gets [`READ_BUDGET`] on a thread of its own: it has pathological
/// inputs the checks before it do not catch (the fuzzer keeps finding some), and a
/// line it cannot read in time is asked, not waited on. A reader still busy past
/// its budget is left to finish; while two are, lines are not read at all (asked).
pub fn read(line: &str, cwd: &Path, home: Option<&Path>) -> Result<Line, Unreadable> {
    Reading::start(line, cwd, home)
        .outcome()
        .unwrap_or_else(|| Err(Unreadable("the line was read already".into())))
}

/// A line being read on its thread (see [`read`]), started as soon as the line is
/// known: the hook loads its settings meanwhile, so on a machine with two cores
/// the thread and the parser cost the hook next to nothing. Taken once.
#[derive(Clone)]
pub struct Reading(std::sync::Arc<ReadingState>);

struct ReadingState {
    /// What is read, so that it is only taken for that line.
    line: String,
    cwd: PathBuf,
    home: Option<PathBuf>,
    /// When the parser started: its budget counts from then.
    started: std::time::Instant,
    /// The reader's answer, until taken; `None` once taken.
    outcome: std::sync::Mutex<Option<Outcome>>,
}

/// Where a reading stands.
enum Outcome {
    /// On its thread; `abandoned` tells it nobody waits any more.
    Reading {
        answer: std::sync::mpsc::Receiver<Result<Line, Unreadable>>,
        abandoned: std::sync::Arc<std::sync::atomic::AtomicBool>,
    },
    /// It could not start (too many overdue readers, no thread).
    Refused(Unreadable),
    /// A plain line, read at once without the parser (see [`super::plain`]).
    Read(Result<Line, Unreadable>),
}

/// Readers still busy past their budget (see [`read`]).
static OVERDUE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Reading {
    /// Starts reading `line`: a plain line at once (see [`super::plain`]),
    /// anything else on a thread of its own.
    pub fn start(line: &str, cwd: &Path, home: Option<&Path>) -> Reading {
        use std::sync::{Arc, atomic::AtomicBool, atomic::Ordering};
        let state = Arc::new(ReadingState {
            line: line.to_string(),
            cwd: cwd.to_path_buf(),
            home: home.map(Path::to_path_buf),
            started: std::time::Instant::now(),
            outcome: std::sync::Mutex::new(None),
        });
        let plain = crate::runtime::tuning::fast_paths()
            .then(|| read_plain(line, cwd, home))
            .flatten();
        let outcome = if let Some(read) = plain {
            Outcome::Read(read)
        } else if OVERDUE.load(Ordering::Relaxed) >= 2 {
            Outcome::Refused(Unreadable(
                "the shell reader is still busy with earlier lines".into(),
            ))
        } else {
            let abandoned = Arc::new(AtomicBool::new(false));
            let (tx, answer) = std::sync::mpsc::channel();
            let (read, gone) = (state.clone(), abandoned.clone());
            let reader = std::thread::Builder::new()
                .name("shell-reader".into())
                .stack_size(32 << 20)
                .spawn(move || {
                    let _ = tx.send(read_now(&read.line, &read.cwd, read.home.as_deref()));
                    if gone.load(Ordering::SeqCst) {
                        OVERDUE.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            match reader {
                Ok(_) => Outcome::Reading { answer, abandoned },
                Err(_) => Outcome::Refused(Unreadable("no thread to read it on".into())),
            }
        };
        if let Ok(mut slot) = state.outcome.lock() {
            *slot = Some(outcome);
        }
        Reading(state)
    }

    /// What was read, if this reading is of `line` in `cwd` for `home` and was not
    /// taken yet; waits for it within the budget.
    pub fn take(
        &self,
        line: &str,
        cwd: &Path,
        home: Option<&Path>,
    ) -> Option<Result<Line, Unreadable>> {
        let state = &self.0;
        if state.line != line || state.cwd != cwd || state.home.as_deref() != home {
            return None;
        }
        self.outcome()
    }

    /// What was read, unless it was taken; waits for it within the budget.
    fn outcome(&self) -> Option<Result<Line, Unreadable>> {
        let outcome = self.0.outcome.lock().ok()?.take()?;
        Some(Reading::wait(outcome, self.0.started))
    }

    fn wait(outcome: Outcome, started: std::time::Instant) -> Result<Line, Unreadable> {
        use std::sync::atomic::Ordering;
        use std::sync::mpsc::RecvTimeoutError;
        let (answer, abandoned) = match outcome {
            Outcome::Refused(why) => return Err(why),
            Outcome::Read(read) => return read,
            Outcome::Reading { answer, abandoned } => (answer, abandoned),
        };
        match answer.recv_timeout(READ_BUDGET.saturating_sub(started.elapsed())) {
            Ok(read) => read,
            Err(RecvTimeoutError::Timeout) => {
                OVERDUE.fetch_add(1, Ordering::SeqCst);
                abandoned.store(true, Ordering::SeqCst);
                // It may have finished in between.
                if let Ok(read) = answer.try_recv() {
                    return read;
                }
                Err(Unreadable(format!(
                    "reading it took longer than {} ms",
                    READ_BUDGET.as_millis()
                )))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err(Unreadable("the shell parser gave up on it".into()))
            }
        }
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading")
            .field("line", &self.0.line)
            .finish_non_exhaustive()
    }
}

/// How long a line may take to read (a long here-document takes milliseconds).
pub const READ_BUDGET: std::time::Duration = std::time::Duration::from_millis(300);

/// [`read`] on this thread, however long it takes; plain lines and words without
/// the parser when the fast paths are on.
fn read_now(line: &str, cwd: &Path, home: Option<&Path>) -> Result<Line, Unreadable> {
    let mut walker = Walker::new(cwd, home, Readers::PlainFirst);
    walker.line_text(line)?;
    Ok(walker.line)
}

/// A line read without the parser, if it and every line nested in it are plain
/// (see [`super::plain`]): such a line cannot hang the reader, so it needs no
/// thread of its own.
fn read_plain(line: &str, cwd: &Path, home: Option<&Path>) -> Option<Result<Line, Unreadable>> {
    let mut walker = Walker::new(cwd, home, Readers::PlainOnly);
    let read = walker.line_text(line);
    if walker.wanted_parser {
        return None;
    }
    Some(read.map(|()| walker.line))
}

/// Whether `line` is plain: read without brush's parser (see [`super::plain`]).
pub fn is_plain(line: &str) -> bool {
    super::plain::program(line).is_some()
}

/// `line` read by brush's parser alone, on this thread, however long it takes:
/// what the plain reader must agree with (the fuzz target and the tests check it).
pub fn read_with_parser(line: &str, cwd: &Path, home: Option<&Path>) -> Result<Line, Unreadable> {
    let mut walker = Walker::new(cwd, home, Readers::ParserOnly);
    walker.line_text(line)?;
    Ok(walker.line)
}

/// Which readers of shell text a walk may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readers {
    /// The plain reader where it can ([`super::plain`]), brush's parser elsewhere.
    PlainFirst,
    /// The plain reader only: a text it cannot read stops the walk.
    PlainOnly,
    /// brush's parser only.
    ParserOnly,
}

/// Walks a parsed line, keeping what a shell running it would know.
struct Walker {
    line: Line,
    /// Variables the line set to known values (`NAME=value`, `export NAME=…`);
    /// a variable set to something unknown is here as unknown.
    vars: HashMap<String, Word>,
    /// The current folder, while known.
    cwd: Option<PathBuf>,
    home: Option<PathBuf>,
    depth: usize,
    options: ParserOptions,
    readers: Readers,
    /// A text was met that only the parser reads (with [`Readers::PlainOnly`]).
    wanted_parser: bool,
}

impl Walker {
    fn new(cwd: &Path, home: Option<&Path>, readers: Readers) -> Walker {
        let readers = match readers {
            Readers::PlainFirst if !crate::runtime::tuning::fast_paths() => Readers::ParserOnly,
            other => other,
        };
        Walker {
            line: Line::default(),
            vars: HashMap::new(),
            cwd: Some(cwd.to_path_buf()),
            home: home.map(Path::to_path_buf),
            depth: 0,
            options: ParserOptions::default(),
            readers,
            wanted_parser: false,
        }
    }

    /// Whether plain lines and words may be read without the parser.
    fn plain_first(&self) -> bool {
        self.readers != Readers::ParserOnly
    }

    /// Parses and walks one line of shell text (the whole line, or a nested one).
    fn line_text(&mut self, text: &str) -> Result<(), Unreadable> {
        if text.len() > MAX_LINE_BYTES {
            return Err(Unreadable(format!(
                "the command is over {} KiB",
                MAX_LINE_BYTES >> 10
            )));
        }
        if self.depth > MAX_DEPTH {
            return Err(Unreadable(format!(
                "commands are nested more than {MAX_DEPTH} deep"
            )));
        }
        // Said at once, not after the parser's backtracking (see `unclosed`).
        // Counted with quotes (which may hide them) and without (which may be
        // unbalanced and hide the rest).
        if unclosed_parentheses(text) > 3 || plainly_unclosed(text) > 12 {
            return Err(unclosed());
        }
        if let Some(why) = lines_the_parser_loops_on(text) {
            return Err(why);
        }
        let plain = self.plain_first().then(|| super::plain::program(text));
        let program = match plain.flatten() {
            Some(program) => program,
            None if self.readers == Readers::PlainOnly => {
                self.wanted_parser = true;
                return Err(Unreadable("the line is not plain".into()));
            }
            None => {
                let options = &self.options;
                unpanicked(|| {
                    brush_parser::Parser::new(std::io::Cursor::new(text.as_bytes()), options)
                        .parse_program()
                })?
                .map_err(|e| Unreadable(format!("bash would not read it the same way: {e}")))?
            }
        };
        for list in &program.complete_commands {
            self.compound_list(list)?;
        }
        Ok(())
    }

    /// Runs `f` as in a subshell: the folder and variables it changes are put back.
    fn scoped<T>(&mut self, f: impl FnOnce(&mut Walker) -> T) -> T {
        let (cwd, vars) = (self.cwd.clone(), self.vars.clone());
        let out = f(self);
        self.cwd = cwd;
        self.vars = vars;
        out
    }

    /// Runs `f` as a part that may or may not run (a branch, a loop's body): a
    /// folder it changes is unknown afterwards.
    fn maybe<T>(&mut self, f: impl FnOnce(&mut Walker) -> T) -> T {
        let cwd = self.cwd.clone();
        let out = f(self);
        if self.cwd != cwd {
            self.cwd = None;
        }
        out
    }

    fn compound_list(&mut self, list: &ast::CompoundList) -> Result<(), Unreadable> {
        for item in &list.0 {
            let background = matches!(item.1, ast::SeparatorOperator::Async);
            if background {
                self.scoped(|w| w.and_or(&item.0))?;
            } else {
                self.and_or(&item.0)?;
            }
        }
        Ok(())
    }

    fn and_or(&mut self, list: &ast::AndOrList) -> Result<(), Unreadable> {
        self.pipeline(&list.first)?;
        for next in &list.additional {
            let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
            self.pipeline(p)?;
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), Unreadable> {
        if let [only] = pipeline.seq.as_slice() {
            return self.command(only, Input::default());
        }
        // Each stage runs in a subshell; what the earlier ones print reaches the
        // later ones.
        let mut input = Input::default();
        for stage in &pipeline.seq {
            let start = self.line.commands.len();
            self.scoped(|w| w.command(stage, input.clone()))?;
            let added = &self.line.commands[start..];
            input = Input {
                downloaded: input.downloaded || downloads(added),
                text: echoed(added),
                piped: true,
            };
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, input: Input) -> Result<(), Unreadable> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, input),
            ast::Command::Compound(compound, redirects) => {
                let input = self.compound_redirects(redirects.as_ref(), input)?;
                self.compound(compound, input)
            }
            ast::Command::Function(function) => self.function(function),
            ast::Command::ExtendedTest(test, redirects) => {
                self.compound_redirects(redirects.as_ref(), input)?;
                self.test_expr(&test.expr)
            }
        }
    }

    /// A compound command's redirections, kept as a command without words (so
    /// `{ …; } > .env` is seen writing `.env`); the input they give its insides.
    fn compound_redirects(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        mut input: Input,
    ) -> Result<Input, Unreadable> {
        let Some(list) = redirects else {
            return Ok(input);
        };
        let mut command = Command {
            cwd: self.cwd.clone(),
            ..Command::default()
        };
        for r in &list.0 {
            self.redirect(r, &mut command.redirects, &mut input)?;
        }
        command.input = input.clone();
        self.line.commands.push(command);
        Ok(input)
    }

    fn compound(
        &mut self,
        compound: &ast::CompoundCommand,
        input: Input,
    ) -> Result<(), Unreadable> {
        // What a compound command's input reaches: every command inside it that
        // reads its input.
        let start = self.line.commands.len();
        match compound {
            ast::CompoundCommand::BraceGroup(group) => self.compound_list(&group.list)?,
            ast::CompoundCommand::Subshell(sub) => self.scoped(|w| w.compound_list(&sub.list))?,
            ast::CompoundCommand::ForClause(f) => self.for_clause(f)?,
            ast::CompoundCommand::ArithmeticForClause(f) => {
                self.maybe(|w| w.compound_list(&f.body.list))?
            }
            ast::CompoundCommand::CaseClause(case) => {
                self.word(&case.value.value)?;
                for item in &case.cases {
                    if let Some(list) = &item.cmd {
                        self.maybe(|w| w.compound_list(list))?;
                    }
                }
            }
            ast::CompoundCommand::IfClause(clause) => {
                self.compound_list(&clause.condition)?;
                self.maybe(|w| w.compound_list(&clause.then))?;
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.maybe(|w| w.compound_list(condition))?;
                    }
                    self.maybe(|w| w.compound_list(&other.body))?;
                }
            }
            ast::CompoundCommand::WhileClause(clause)
            | ast::CompoundCommand::UntilClause(clause) => self.maybe(|w| {
                w.compound_list(&clause.0)?;
                w.compound_list(&clause.1.list)
            })?,
            ast::CompoundCommand::Arithmetic(arithmetic) => {
                // `(( x = $(…) ))` runs what it substitutes.
                self.word(&arithmetic.expr.value)?;
            }
            ast::CompoundCommand::Coprocess(co) => {
                self.scoped(|w| w.command(&co.body, Input::default()))?
            }
        }
        if input != Input::default() {
            for c in &mut self.line.commands[start..] {
                if c.input == Input::default() {
                    c.input = input.clone();
                }
            }
        }
        Ok(())
    }

    /// `for NAME in WORDS`: the body is walked once for each of a few known words
    /// (so `for f in a b; do rm -rf $f; done` is judged on `a` and `b`), else
    /// once with the name unknown.
    fn for_clause(&mut self, clause: &ast::ForClauseCommand) -> Result<(), Unreadable> {
        let mut values = Vec::new();
        for v in clause.values.iter().flatten() {
            values.push(self.word(&v.value)?);
        }
        let name = clause.variable_name.clone();
        self.line.assigned.push(name.clone());
        if values.is_empty() || values.len() > 8 || values.iter().any(|v| !v.is_plain()) {
            let shown = format!("${name}");
            let glob = values.iter().any(|v| v.glob);
            self.vars.insert(
                name,
                Word {
                    glob,
                    ..Word::unknown(shown)
                },
            );
            return self.maybe(|w| w.compound_list(&clause.body.list));
        }
        for value in values {
            self.vars.insert(name.clone(), value);
            self.maybe(|w| w.compound_list(&clause.body.list))?;
        }
        Ok(())
    }

    fn function(&mut self, function: &ast::FunctionDefinition) -> Result<(), Unreadable> {
        let name = function.fname.value.clone();
        let start = self.line.commands.len();
        self.scoped(|w| w.compound(&function.body.0, Input::default()))?;
        if calls_itself_in_parallel(&function.body.0, &name) {
            self.line.fork_bombs.push(name);
        }
        // The body runs where the function is called, which may be anywhere.
        for c in &mut self.line.commands[start..] {
            c.cwd = None;
        }
        Ok(())
    }

    fn test_expr(&mut self, expr: &ast::ExtendedTestExpr) -> Result<(), Unreadable> {
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a)?;
                self.test_expr(b)
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => self.word(&w.value).map(drop),
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value)?;
                self.word(&b.value).map(drop)
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, mut input: Input) -> Result<(), Unreadable> {
        let mut command = Command::default();
        let mut assignments = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, _) => {
                    let (name, value) = self.assignment(assignment)?;
                    self.line.assigned.push(name.clone());
                    assignments.push((name, value));
                }
                other => self.item(other, &mut command, &mut input)?,
            }
        }
        if let Some(name) = &simple.word_or_name {
            let word = self.word(&name.value)?;
            command.words.push(word);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                // `export X=1` and friends: an argument, and an assignment.
                ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                    let value = self.assignment(assignment)?;
                    self.line.assigned.push(value.0.clone());
                    command.words.push(self.word(&word.value)?);
                    if is_declaration(command.words.first()) {
                        self.vars.insert(value.0, value.1);
                    }
                }
                other => self.item(other, &mut command, &mut input)?,
            }
        }
        command.input = input;
        command.cwd = self.cwd.clone();
        if command.words.is_empty() {
            // Assignments alone set the shell's variables.
            for (name, value) in assignments {
                self.vars.insert(name, value);
            }
        }
        self.nested(&command)?;
        self.follow_cd(&command);
        if !command.words.is_empty() || !command.redirects.is_empty() {
            self.line.commands.push(command);
        }
        Ok(())
    }

    fn assignment(&mut self, assignment: &ast::Assignment) -> Result<(String, Word), Unreadable> {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
                n.clone()
            }
        };
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(w) => self.word(&w.value)?,
            ast::AssignmentValue::Array(items) => {
                for (key, value) in items {
                    if let Some(k) = key {
                        self.word(&k.value)?;
                    }
                    self.word(&value.value)?;
                }
                Word::unknown(format!("${name}"))
            }
        };
        let value = if assignment.append
            || matches!(assignment.name, ast::AssignmentName::ArrayElementName(..))
        {
            Word::unknown(format!("${name}"))
        } else {
            value
        };
        Ok((name, value))
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        command: &mut Command,
        input: &mut Input,
    ) -> Result<(), Unreadable> {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                let word = self.word(&w.value)?;
                command.words.push(word);
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                let word = self.word(&w.value)?;
                command.words.push(word);
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                self.redirect(r, &mut command.redirects, input)?;
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                let downloaded = self.substitution(|w| w.compound_list(&sub.list))?;
                command.words.push(Word {
                    downloaded,
                    ..Word::unknown("/dev/fd/63")
                });
            }
        }
        Ok(())
    }

    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
        out: &mut Vec<Redirect>,
        input: &mut Input,
    ) -> Result<(), Unreadable> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
        match redirect {
            ast::IoRedirect::File(fd, kind, target) => {
                let word = match target {
                    T::Filename(w) => self.word(&w.value)?,
                    T::Fd(_) => return Ok(()),
                    T::Duplicate(w) => {
                        // `>&2` duplicates; `>& file` (no digits) is `&> file`.
                        let word = self.word(&w.value)?;
                        if word.text.chars().all(|c| c.is_ascii_digit() || c == '-')
                            && !word.unknown
                        {
                            return Ok(());
                        }
                        word
                    }
                    T::ProcessSubstitution(_, sub) => {
                        let downloaded = self.substitution(|w| w.compound_list(&sub.list))?;
                        if matches!(kind, K::Read) && fd.is_none_or(|fd| fd == 0) {
                            input.downloaded |= downloaded;
                            input.piped = true;
                        }
                        return Ok(());
                    }
                };
                let kind = match kind {
                    K::Read | K::DuplicateInput => {
                        if fd.is_none_or(|fd| fd == 0) {
                            input.piped = true;
                            input.downloaded |= word.downloaded;
                        }
                        RedirectKind::Read
                    }
                    K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput => {
                        RedirectKind::Write
                    }
                };
                out.push(Redirect { kind, target: word });
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let word = self.word(&w.value)?;
                out.push(Redirect {
                    kind: RedirectKind::Write,
                    target: word,
                });
            }
            ast::IoRedirect::HereDocument(fd, doc) => {
                let text = if doc.requires_expansion {
                    self.heredoc(&doc.doc.value)?
                } else {
                    Word::known(doc.doc.value.clone())
                };
                if fd.is_none_or(|fd| fd == 0) {
                    input.downloaded |= text.downloaded;
                    input.text = Some(text.text);
                }
            }
            ast::IoRedirect::HereString(fd, w) => {
                let word = self.word(&w.value)?;
                if fd.is_none_or(|fd| fd == 0) {
                    input.downloaded |= word.downloaded;
                    input.text = Some(word.text);
                }
            }
        }
        Ok(())
    }

    /// Walks a substitution's commands as a subshell; whether what it prints is
    /// a download.
    fn substitution(
        &mut self,
        f: impl FnOnce(&mut Walker) -> Result<(), Unreadable>,
    ) -> Result<bool, Unreadable> {
        let start = self.line.commands.len();
        self.depth += 1;
        let result = self.scoped(f);
        self.depth -= 1;
        result?;
        Ok(downloads(&self.line.commands[start..]))
    }

    /// A nested line of text (`$(…)`'s inside, `bash -c`'s string).
    fn nested_text(&mut self, text: &str) -> Result<bool, Unreadable> {
        let text = text.to_string();
        self.substitution(|w| w.line_text(&text))
    }

    fn heredoc(&mut self, raw: &str) -> Result<Word, Unreadable> {
        // Quotes are text in a here-document: every parenthesis counts.
        if plainly_unclosed(raw) > 3 {
            return Err(unclosed());
        }
        let options = &self.options;
        let pieces = unpanicked(|| word::parse_heredoc(raw, options))?
            .map_err(|e| Unreadable(format!("a here-document does not read: {e}")))?;
        let mut out = Word::default();
        self.pieces(&pieces, raw, true, &mut out)?;
        Ok(out)
    }

    /// One word, as the command will receive it.
    fn word(&mut self, raw: &str) -> Result<Word, Unreadable> {
        if self.plain_first() && super::plain::is_plain_word(raw) {
            return Ok(Word::known(raw));
        }
        if self.readers == Readers::PlainOnly {
            self.wanted_parser = true;
            return Err(Unreadable("the word is not plain".into()));
        }
        if unclosed_parentheses(raw) > 3 {
            return Err(unclosed());
        }
        let options = &self.options;
        let pieces = unpanicked(|| word::parse(raw, options))?
            .map_err(|e| Unreadable(format!("the word {raw:?} does not read: {e}")))?;
        let mut out = Word::default();
        self.pieces(&pieces, raw, false, &mut out)?;
        Ok(out)
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        raw: &str,
        quoted: bool,
        out: &mut Word,
    ) -> Result<(), Unreadable> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(t) => {
                    if !quoted && has_glob(t) {
                        out.glob = true;
                    }
                    out.text.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => out.text.push_str(t),
                WordPiece::AnsiCQuotedText(t) => out.text.push_str(&ansi_c(t)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, raw, true, out)?;
                }
                WordPiece::EscapeSequence(e) => {
                    let c = e.strip_prefix('\\').unwrap_or(e);
                    // In double quotes a backslash stays unless it escapes one of
                    // `$`, `` ` ``, `"`, `\`; a line break after one is removed.
                    if quoted && !c.starts_with(['$', '`', '"', '\\', '\n']) {
                        out.text.push('\\');
                    }
                    if c != "\n" {
                        out.text.push_str(c);
                    }
                }
                WordPiece::TildeExpansion(t) => match t {
                    TildeExpr::Home => match &self.home {
                        Some(h) => out.text.push_str(&h.to_string_lossy()),
                        None => unknown(out, "~"),
                    },
                    TildeExpr::UserHome(user) => {
                        match nix::unistd::User::from_name(user).ok().flatten() {
                            Some(u) => out.text.push_str(&u.dir.to_string_lossy()),
                            None => unknown(out, &format!("~{user}")),
                        }
                    }
                    TildeExpr::WorkingDir => match &self.cwd {
                        Some(c) => out.text.push_str(&c.to_string_lossy()),
                        None => unknown(out, "~+"),
                    },
                    _ => unknown(out, "~-"),
                },
                WordPiece::ParameterExpansion(expr) => self.parameter(expr, p, raw, out)?,
                WordPiece::CommandSubstitution(body) => {
                    out.downloaded |= self.nested_text(body)?;
                    unknown(out, "$(…)");
                }
                WordPiece::BackquotedCommandSubstitution(body) => {
                    let body = body
                        .replace("\\`", "`")
                        .replace("\\$", "$")
                        .replace("\\\\", "\\");
                    out.downloaded |= self.nested_text(&body)?;
                    unknown(out, "$(…)");
                }
                WordPiece::ArithmeticExpression(expr) => {
                    // `$(( $(…) ))` runs what it substitutes.
                    let inner = self.word(&expr.value)?;
                    out.downloaded |= inner.downloaded;
                    unknown(out, "$((…))");
                }
            }
        }
        Ok(())
    }

    fn parameter(
        &mut self,
        expr: &ParameterExpr,
        piece: &WordPieceWithSource,
        raw: &str,
        out: &mut Word,
    ) -> Result<(), Unreadable> {
        if let ParameterExpr::Parameter {
            parameter: Parameter::Named(name),
            indirect: false,
        } = expr
        {
            if let Some(value) = self.variable(name) {
                out.text.push_str(&value.text);
                out.unknown |= value.unknown;
                out.glob |= value.glob;
                out.downloaded |= value.downloaded;
            } else {
                unknown(out, &format!("${name}"));
            }
            return Ok(());
        }
        // `${x:-$(…)}` and its kind run what they hold: walked as a word.
        let source = raw.get(piece.start_index..piece.end_index).unwrap_or("");
        if let Some(at) = source.find(['`', '$']).filter(|_| source.len() > 2) {
            let rest = source[at..].strip_suffix('}').unwrap_or(&source[at..]);
            if rest != source {
                let inner = self.word(rest)?;
                out.downloaded |= inner.downloaded;
            }
        }
        unknown(out, source);
        Ok(())
    }

    /// A variable's value, when the line set it or it is one whose value the hook
    /// shares with the command (the home, the folder).
    fn variable(&self, name: &str) -> Option<Word> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        match name {
            "HOME" => self.home.as_ref().map(|h| Word::known(h.to_string_lossy())),
            "PWD" => self.cwd.as_ref().map(|c| Word::known(c.to_string_lossy())),
            _ => None,
        }
    }

    /// The lines a command runs as text: `bash -c '…'`, `eval …`, `su -c`,
    /// `watch`, `env -S`, `xargs sh -c`, `find -exec sh -c`.
    fn nested(&mut self, command: &Command) -> Result<(), Unreadable> {
        for program in command.programs() {
            if let Some(text) = program.code_text()
                && !text.unknown
            {
                let saved = self.cwd.clone();
                self.cwd = program.cwd.clone();
                let result = self.nested_text(&text.text);
                self.cwd = saved;
                result?;
            }
        }
        Ok(())
    }

    /// `cd DIR`, `pushd DIR`: later commands run there.
    fn follow_cd(&mut self, command: &Command) {
        let Some(first) = command.words.first() else {
            return;
        };
        if !matches!(first.text.as_str(), "cd" | "pushd" | "popd") || first.unknown {
            return;
        }
        let args: Vec<&Word> = command.words[1..]
            .iter()
            .filter(|w| !(w.text.starts_with('-') && w.text.len() > 1 && !w.unknown))
            .collect();
        self.cwd = match (first.text.as_str(), args.as_slice()) {
            ("popd", _) => None,
            (_, []) => self.home.clone(),
            (_, [dir, ..]) if dir.is_plain() && dir.text != "-" => {
                self.cwd.as_ref().map(|cwd| lexical(&cwd.join(&dir.text)))
            }
            _ => None,
        };
    }
}

/// Why a text with parentheses opened and never closed is not read: a syntax error,
/// through which the parser would backtrack every way of reading each one (22 of
/// them took 0.15 s; 30 would take minutes).
fn unclosed() -> Unreadable {
    Unreadable("bash would not read it: parentheses are opened and never closed".into())
}

/// Text bash itself refuses that sends the parser round for ever (the fuzzer's
/// finds): control characters other than tab and line breaks (a form feed after
/// `<<`), and `<<` with no delimiter word after it (`$(cat << && x #)`). Shell
/// written by an agent has neither.
fn lines_the_parser_loops_on(text: &str) -> Option<Unreadable> {
    if text
        .chars()
        .any(|c| (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{7f}')
    {
        return Some(Unreadable(
            "it holds control characters a command line does not".into(),
        ));
    }
    let mut rest = text;
    while let Some(at) = rest.find("<<") {
        let after = &rest[at + 2..];
        if let Some(more) = after.strip_prefix('<') {
            rest = more;
            continue;
        }
        let word = after
            .trim_start_matches('-')
            .trim_start_matches([' ', '\t']);
        if word.is_empty() || word.starts_with(['&', '|', ';', '<', '>', '(', ')', '\n', '#']) {
            return Some(Unreadable(
                "a here-document (<<) has no delimiter word".into(),
            ));
        }
        rest = after;
    }
    None
}

/// How many more `(` than `)` `text` has, quotes or not.
fn plainly_unclosed(text: &str) -> usize {
    text.matches('(')
        .count()
        .saturating_sub(text.matches(')').count())
}

/// Runs the parser, a panic in it (an fd number past `i32`, `9999999999>`) taken
/// as a line it cannot read: the guard asks instead of dying without an answer.
fn unpanicked<T>(parse: impl FnOnce() -> T) -> Result<T, Unreadable> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse))
        .map_err(|_| Unreadable("the shell parser gave up on it".into()))
}

/// How many `(` of `text` are never closed, outside quotes, escapes and comments
/// (a here-document's text is counted too: a line with one may be asked).
fn unclosed_parentheses(text: &str) -> usize {
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    let mut at_word_start = true;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' => {
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
            }
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '#' if at_word_start => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at_word_start = c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(');
    }
    depth
}

/// Marks `out` unknown, showing `shown` where its value would be.
fn unknown(out: &mut Word, shown: &str) {
    out.text.push_str(shown);
    out.unknown = true;
}

/// Whether unquoted text has glob or brace-expansion characters.
fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
        || (text.contains('{') && text.contains('}') && (text.contains(',') || text.contains("..")))
}

/// `$'…'` text with its escapes worked out (the common ones; others kept).
fn ansi_c(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let hex = |chars: &mut std::iter::Peekable<std::str::Chars>, max: usize| {
            let mut n = 0u32;
            let mut digits = 0;
            while digits < max
                && let Some(d) = chars.peek().and_then(|c| c.to_digit(16))
            {
                n = n * 16 + d;
                chars.next();
                digits += 1;
            }
            char::from_u32(n)
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' => out.extend(hex(&mut chars, 2)),
            'u' => out.extend(hex(&mut chars, 4)),
            'U' => out.extend(hex(&mut chars, 8)),
            '0'..='7' => {
                let mut n = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            n = n * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(n));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Whether a command is `export`, `declare`, `local`, `readonly` or `typeset`,
/// whose `NAME=value` arguments set variables.
fn is_declaration(first: Option<&Word>) -> bool {
    first.is_some_and(|w| {
        matches!(
            w.text.as_str(),
            "export" | "declare" | "local" | "readonly" | "typeset"
        )
    })
}

/// Whether any of `commands` downloads (after its wrappers).
fn downloads(commands: &[Command]) -> bool {
    commands
        .iter()
        .flat_map(Command::programs)
        .any(|p| DOWNLOADERS.contains(&p.name.as_str()))
}

/// The text a pipeline stage prints when the line holds it: `echo …`, `printf …`.
fn echoed(stage: &[Command]) -> Option<String> {
    let [only] = stage else { return None };
    let program = only.programs().into_iter().next()?;
    match program.name.as_str() {
        "echo" | "printf" => Some(
            program
                .args
                .iter()
                .filter(|a| !a.text.starts_with('-'))
                .map(|a| a.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// Whether a function's body runs the function again in a pipeline or in the
/// background: each call starts more of itself at once.
fn calls_itself_in_parallel(body: &ast::CompoundCommand, name: &str) -> bool {
    let text = body.to_string();
    // The body as bash prints it back: calls are words; look for `name | name`,
    // `name &` or `name|`.
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    let calls = |w: &str| w == name || w.trim_matches(['|', '&', '(', ')', '{', '}']) == name;
    words.windows(2).any(|pair| {
        calls(pair[0]) && (pair[1].starts_with('|') || pair[1].starts_with('&'))
            || (pair[0].ends_with('|') || pair[0] == "|") && calls(pair[1])
    }) || words.iter().any(|w| {
        w.contains('|')
            && w.split('|')
                .filter(|p| p.trim_matches(['&', '(', ')', '{', '}']) == name)
                .count()
                >= 2
    })
}

/// `path` with `.`, `..` and doubled slashes worked out as text (for a folder
/// that `cd` enters: the shell's logical `cd` does the same).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// How a wrapper's options read: which take a value, and how many words follow
/// them before the command they run.
struct Wrapper {
    name: &'static str,
    /// Short options that take a value (`-u root`, `-uroot`).
    short_values: &'static str,
    /// Long options that take a value as the next word (`--user root`).
    long_values: &'static [&'static str],
    /// Words after the options before the command (`timeout`'s duration).
    operands: usize,
    /// `NAME=value` words after the options are the command's environment.
    assignments: bool,
}

impl Wrapper {
    /// A wrapper whose options are read by `short_values` and `long_values`.
    const fn new(
        name: &'static str,
        short_values: &'static str,
        long_values: &'static [&'static str],
    ) -> Wrapper {
        Wrapper {
            name,
            short_values,
            long_values,
            operands: 0,
            assignments: false,
        }
    }

    /// With `n` words after its options before the command.
    const fn operands(mut self, n: usize) -> Wrapper {
        self.operands = n;
        self
    }

    /// With `NAME=value` words before the command.
    const fn assignments(mut self) -> Wrapper {
        self.assignments = true;
        self
    }
}

#[rustfmt::skip]
const WRAPPERS: &[Wrapper] = &[
    Wrapper::new("sudo", "ughpCDrtUTR", &["--user", "--group", "--host", "--prompt", "--close-from",
        "--chdir", "--role", "--type", "--other-user", "--command-timeout", "--chroot"]).assignments(),
    Wrapper::new("doas", "uC", &[]),
    Wrapper::new("env", "uCSP", &["--unset", "--chdir", "--split-string"]).assignments(),
    Wrapper::new("nice", "n", &["--adjustment"]),
    Wrapper::new("nohup", "", &[]),
    Wrapper::new("setsid", "", &[]),
    Wrapper::new("time", "fo", &["--format", "--output"]),
    Wrapper::new("command", "", &[]),
    Wrapper::new("builtin", "", &[]),
    Wrapper::new("exec", "a", &[]),
    Wrapper::new("stdbuf", "ioe", &["--input", "--output", "--error"]),
    Wrapper::new("ionice", "cnp", &["--class", "--classdata", "--pid"]),
    Wrapper::new("chrt", "T", &[]).operands(1),
    Wrapper::new("taskset", "", &[]).operands(1),
    Wrapper::new("timeout", "sk", &["--signal", "--kill-after"]).operands(1),
    Wrapper::new("busybox", "", &[]),
    Wrapper::new("unbuffer", "", &[]),
    Wrapper::new("chronic", "", &[]),
    Wrapper::new("caffeinate", "tw", &[]),
    Wrapper::new("pkexec", "", &["--user"]),
    Wrapper::new("runuser", "ugGw", &["--user", "--group", "--supp-group", "--whitelist-environment"]),
    Wrapper::new("flock", "wEc", &["--timeout", "--conflict-exit-code", "--command"]).operands(1),
    Wrapper::new("systemd-run", "pEMu", &["--property", "--setenv", "--machine", "--unit",
        "--description", "--slice", "--uid", "--gid", "--working-directory"]),
    Wrapper::new("strace", "eoOpPsSuXbI", &[]),
    Wrapper::new("ltrace", "eoOpnsSuaA", &[]),
    Wrapper::new("xargs", "IiLlnPdEeas", &["--replace", "--max-lines", "--max-args", "--max-procs",
        "--delimiter", "--eof", "--arg-file", "--max-chars", "--process-slot-var"]),
];

impl Command {
    /// The programs this command runs, wrappers taken off: usually one; `find`
    /// with `-exec` is `find` and each command it runs.
    pub fn programs(&self) -> Vec<Program> {
        if self.words.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        unwrap(
            &self.words,
            self.cwd.clone(),
            self.input.clone(),
            &mut out,
            0,
        );
        out
    }
}

/// The program `words` run, wrappers taken off, into `out`.
fn unwrap(
    words: &[Word],
    cwd: Option<PathBuf>,
    input: Input,
    out: &mut Vec<Program>,
    depth: usize,
) {
    let mut words = words.to_vec();
    let mut cwd = cwd;
    let mut input = input;
    let mut taken = Taken::default();
    loop {
        let Some(first) = words.first() else { return };
        let name = if first.unknown {
            String::new()
        } else {
            first.text.rsplit('/').next().unwrap_or("").to_string()
        };
        // `command -v rm` asks where rm is; it runs nothing.
        if name == "command"
            && words
                .get(1)
                .is_some_and(|w| w.text == "-v" || w.text == "-V")
        {
            out.push(program(name, words, cwd, input, &taken));
            return;
        }
        if name == "find" && depth < 4 {
            find_exec(&words, &cwd, out, depth);
            out.push(program(name, words, cwd, input, &taken));
            return;
        }
        let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == name) else {
            out.push(program(name, words, cwd, input, &taken));
            return;
        };
        let mut i = 1;
        let mut replace: Option<String> = None;
        // Options.
        while let Some(w) = words.get(i) {
            let t = w.text.as_str();
            if t == "--" {
                i += 1;
                break;
            }
            if wrapper.name == "busybox" || !t.starts_with('-') || t == "-" || w.unknown {
                break;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (key, value) = match long.split_once('=') {
                    Some((k, v)) => (format!("--{k}"), Some(v.to_string())),
                    None => (t.to_string(), None),
                };
                let takes = wrapper.long_values.contains(&key.as_str());
                let value = match (takes, value) {
                    (true, None) => {
                        i += 1;
                        words.get(i).map(|w| w.text.clone())
                    }
                    (_, v) => v,
                };
                apply_option(wrapper.name, &key, value.as_deref(), &mut cwd, &mut replace);
                i += 1;
                continue;
            }
            // A cluster of short options; one that takes a value ends it.
            let letters: Vec<char> = t[1..].chars().collect();
            for (j, c) in letters.iter().enumerate() {
                if wrapper.short_values.contains(*c) {
                    let attached: String = letters[j + 1..].iter().collect();
                    let value = if attached.is_empty() {
                        i += 1;
                        words.get(i).map(|w| w.text.clone())
                    } else {
                        Some(attached)
                    };
                    apply_option(
                        wrapper.name,
                        &format!("-{c}"),
                        value.as_deref(),
                        &mut cwd,
                        &mut replace,
                    );
                    break;
                }
                apply_option(wrapper.name, &format!("-{c}"), None, &mut cwd, &mut replace);
            }
            i += 1;
        }
        // `nice -5 cmd`, `-n`-less forms and the like are options too; then
        // assignments, then operands.
        if wrapper.assignments {
            while let Some(w) = words.get(i).filter(|w| is_assignment(&w.text)) {
                taken
                    .env
                    .extend(w.text.split_once('=').map(|(n, _)| n.to_string()));
                i += 1;
            }
        }
        let operand_end = (i + wrapper.operands).min(words.len());
        // `flock FILE -c '…'` runs text, not a command: see `Program::code_text`.
        let flock_command = wrapper.name == "flock"
            && words[1..]
                .iter()
                .any(|w| w.text == "-c" || w.text == "--command");
        i = operand_end;
        if i >= words.len() || flock_command {
            // A wrapper alone (`sudo -v`, `env`, `xargs` with `echo` as its default).
            if wrapper.name == "xargs" {
                let mut args = vec![Word::unknown("{items}")];
                args.truncate(1);
                let mut taken = taken.clone();
                taken.wrappers.push(name.clone());
                out.push(Program {
                    name: "echo".into(),
                    args,
                    cwd: cwd.clone(),
                    input: input.clone(),
                    wrappers: taken.wrappers,
                    env: taken.env,
                    folders: taken.folders,
                });
            }
            out.push(program(name, words, cwd, input, &taken));
            return;
        }
        taken.wrappers.push(wrapper.name.to_string());
        taken.folders.extend(folder_of(words.first()));
        let mut rest: Vec<Word> = words[i..].to_vec();
        if wrapper.name == "xargs" {
            // The items read from its input become arguments: unknown ones.
            let item = Word {
                downloaded: input.downloaded,
                ..Word::unknown("{item}")
            };
            match &replace {
                Some(r) => {
                    for w in rest.iter_mut().skip(1) {
                        if w.text.contains(r.as_str()) {
                            w.text = w.text.replace(r.as_str(), "{item}");
                            w.unknown = true;
                            w.downloaded |= input.downloaded;
                        }
                    }
                }
                None => rest.push(item),
            }
            input = Input::default();
        }
        words = rest;
    }
}

/// What an option of a wrapper changes for the command it runs.
fn apply_option(
    wrapper: &str,
    option: &str,
    value: Option<&str>,
    cwd: &mut Option<PathBuf>,
    replace: &mut Option<String>,
) {
    match (wrapper, option) {
        ("env", "-C" | "--chdir")
        | ("sudo", "-D" | "--chdir")
        | ("systemd-run", "--working-directory") => {
            *cwd = match (value, cwd.as_ref()) {
                (Some(v), Some(c)) if !v.contains('$') => Some(lexical(&c.join(v))),
                _ => None,
            };
        }
        ("xargs", "-I" | "--replace") => *replace = value.map(str::to_string),
        ("xargs", "-i") => *replace = Some("{}".into()),
        _ => {}
    }
}

/// `NAME=value`.
fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn program(
    name: String,
    words: Vec<Word>,
    cwd: Option<PathBuf>,
    input: Input,
    taken: &Taken,
) -> Program {
    let mut folders = taken.folders.clone();
    folders.extend(folder_of(words.first()));
    Program {
        name,
        args: words.into_iter().skip(1).collect(),
        cwd,
        input,
        wrappers: taken.wrappers.clone(),
        env: taken.env.clone(),
        folders,
    }
}

/// The folder a program is named in (`/tmp/x` of `/tmp/x/cat`), if any.
fn folder_of(word: Option<&Word>) -> Option<PathBuf> {
    let text = &word?.text;
    let (folder, _) = text.rsplit_once('/')?;
    Some(PathBuf::from(if folder.is_empty() { "/" } else { folder }))
}

/// The wrappers taken off so far, the variables they set, and the folders they
/// were named in.
#[derive(Debug, Clone, Default)]
struct Taken {
    wrappers: Vec<String>,
    env: Vec<String>,
    folders: Vec<PathBuf>,
}

/// The commands `find … -exec CMD … {} ;` (and `-execdir`, `-ok`, `-okdir`) runs,
/// with `{}` unknown (the files found).
fn find_exec(words: &[Word], cwd: &Option<PathBuf>, out: &mut Vec<Program>, depth: usize) {
    let mut i = 1;
    while i < words.len() {
        if matches!(
            words[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let start = i + 1;
            let mut end = start;
            while end < words.len() && !matches!(words[end].text.as_str(), ";" | "+") {
                end += 1;
            }
            let run: Vec<Word> = words[start..end]
                .iter()
                .map(|w| {
                    if w.text.contains("{}") {
                        Word {
                            text: w.text.replace("{}", "{found}"),
                            unknown: true,
                            ..w.clone()
                        }
                    } else {
                        w.clone()
                    }
                })
                .collect();
            if !run.is_empty() {
                unwrap(&run, cwd.clone(), Input::default(), out, depth + 1);
            }
            i = end;
        }
        i += 1;
    }
}

impl Program {
    /// The code this program runs given as text: a shell's `-c` string, `eval`'s
    /// words, `su -c`, `watch`'s command, `env -S`, `flock -c`; an interpreter's
    /// `-c`/`-e` string is not shell and is not returned (see
    /// [`Program::inline_code`]).
    pub fn code_text(&self) -> Option<Word> {
        let name = self.name.as_str();
        if SHELLS.contains(&name) {
            return self.shell_invocation().command;
        }
        let joined = |words: &[Word]| -> Option<Word> {
            if words.is_empty() {
                return None;
            }
            let mut w = Word::default();
            for (i, a) in words.iter().enumerate() {
                if i > 0 {
                    w.text.push(' ');
                }
                w.text.push_str(&a.text);
                w.unknown |= a.unknown;
                w.downloaded |= a.downloaded;
            }
            Some(w)
        };
        match name {
            "eval" => joined(&self.args),
            "su" | "sg" | "flock" | "runuser" => {
                let at = self.args.iter().position(|a| {
                    a.text == "-c" || a.text == "--command" || a.text == "--session-command"
                })?;
                self.args.get(at + 1).cloned()
            }
            "watch" => {
                let mut i = 0;
                while let Some(a) = self.args.get(i) {
                    if !a.text.starts_with('-') {
                        break;
                    }
                    if matches!(
                        a.text.as_str(),
                        "-n" | "--interval" | "-d" | "-q" | "--equexit"
                    ) {
                        i += 1;
                    }
                    i += 1;
                }
                joined(&self.args[i.min(self.args.len())..])
            }
            "env" => {
                let at = self
                    .args
                    .iter()
                    .position(|a| a.text == "-S" || a.text == "--split-string")?;
                self.args.get(at + 1).cloned()
            }
            _ => None,
        }
    }

    /// How a shell is run: its `-c` string, its script operand, whether it reads
    /// its input as the script.
    pub fn shell_invocation(&self) -> ShellInvocation {
        let mut has_c = false;
        let mut stdin_script = false;
        let mut i = 0;
        while let Some(a) = self.args.get(i) {
            let t = a.text.as_str();
            if t == "--" || t == "-" {
                i += 1;
                stdin_script |= t == "-";
                break;
            }
            if a.unknown || !(t.starts_with('-') || t.starts_with('+')) {
                break;
            }
            if t.starts_with("--") {
                if matches!(t, "--rcfile" | "--init-file") {
                    i += 1;
                }
            } else {
                let letters = &t[1..];
                has_c |= letters.contains('c');
                stdin_script |= letters.contains('s');
                if letters.contains('o') || letters.contains('O') {
                    i += 1;
                }
            }
            i += 1;
        }
        let operand = self.args.get(i).cloned();
        if has_c {
            ShellInvocation {
                command: operand,
                script: None,
                reads_input: false,
            }
        } else {
            let reads_input = stdin_script || operand.is_none();
            ShellInvocation {
                command: None,
                script: if stdin_script { None } else { operand },
                reads_input,
            }
        }
    }

    /// An interpreter's program given on its command line (`python3 -c CODE`,
    /// `perl -e CODE`, `node -e CODE`, `ruby -e`), or its script operand.
    pub fn interpreter_invocation(&self) -> ShellInvocation {
        let name = self
            .name
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        let code_flags: &[&str] = match name {
            "python" => &["-c"],
            "perl" => &["-e", "-E"],
            "ruby" => &["-e"],
            "node" | "nodejs" | "deno" | "bun" => &["-e", "--eval", "-p", "--print"],
            "php" => &["-r"],
            "lua" => &["-e"],
            _ => &[],
        };
        let mut i = 0;
        while let Some(a) = self.args.get(i) {
            let t = a.text.as_str();
            if code_flags.contains(&t) {
                return ShellInvocation {
                    command: self.args.get(i + 1).cloned(),
                    script: None,
                    reads_input: false,
                };
            }
            // `perl -pie '…'`, `python3 -Bc '…'`: a cluster ending in the flag.
            if t.starts_with('-')
                && !t.starts_with("--")
                && code_flags
                    .iter()
                    .any(|f| t.ends_with(&f[1..]) && f.len() == 2)
                && t.len() > 2
            {
                return ShellInvocation {
                    command: self.args.get(i + 1).cloned(),
                    script: None,
                    reads_input: false,
                };
            }
            if t == "-" {
                return ShellInvocation {
                    command: None,
                    script: None,
                    reads_input: true,
                };
            }
            if !t.starts_with('-') || a.unknown {
                return ShellInvocation {
                    command: None,
                    script: Some(a.clone()),
                    reads_input: false,
                };
            }
            // `python -m module`, `-W arg`, `-X opt`: a value follows.
            if matches!(t, "-m" | "-W" | "-X" | "-I" | "-r" | "--require" | "-M") {
                if t == "-m" {
                    return ShellInvocation {
                        command: None,
                        script: self.args.get(i + 1).cloned(),
                        reads_input: false,
                    };
                }
                i += 1;
            }
            i += 1;
        }
        ShellInvocation {
            command: None,
            script: None,
            reads_input: true,
        }
    }
}

/// How a shell or an interpreter gets its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInvocation {
    /// The program as text (`-c`, `-e`).
    pub command: Option<Word>,
    /// The file it runs.
    pub script: Option<Word>,
    /// It reads the program from its input.
    pub reads_input: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> Vec<String> {
        read(line, Path::new("/p"), Some(Path::new("/home/u")))
            .unwrap()
            .commands
            .iter()
            .flat_map(Command::programs)
            .map(|p| p.shown())
            .collect()
    }

    #[test]
    fn a_reading_started_early_is_taken_once_and_only_for_its_line() {
        let (cwd, home) = (Path::new("/p"), Some(Path::new("/home/u")));
        let reading = Reading::start("rm -rf ~/x", cwd, home);
        assert!(reading.take("rm -rf ~/y", cwd, home).is_none());
        assert!(reading.take("rm -rf ~/x", Path::new("/q"), home).is_none());
        let line = reading.take("rm -rf ~/x", cwd, home).unwrap().unwrap();
        let shown: Vec<String> = line
            .commands
            .iter()
            .flat_map(Command::programs)
            .map(|p| p.shown())
            .collect();
        assert_eq!(shown, ["rm -rf /home/u/x"]);
        assert!(
            reading.take("rm -rf ~/x", cwd, home).is_none(),
            "taken once"
        );
    }

    /// Lines of the guard's corpora, and plain lines made of words that matter to
    /// the walk (shells, `eval`, `cd`, wrappers, declarations) and of operators.
    fn lines_to_compare() -> Vec<String> {
        let mut lines: Vec<String> = [
            include_str!("../../tests/fixtures/guard/everyday.txt"),
            include_str!("../../tests/fixtures/guard/dangerous.txt"),
        ]
        .iter()
        .flat_map(|f| f.lines())
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
        let words = [
            "bash",
            "-c",
            "sh",
            "eval",
            "cd",
            "..",
            "/tmp",
            "pushd",
            "popd",
            "sudo",
            "-u",
            "root",
            "env",
            "-C",
            "sub",
            "xargs",
            "find",
            ".",
            "-exec",
            "rm",
            "-rf",
            "git",
            "push",
            "--force",
            "export",
            "declare",
            "local",
            "readonly",
            "curl",
            "-fsSL",
            "x.sh",
            "echo",
            "%1",
            "@",
            "+x",
            "--a=b",
            "a=",
            "-",
            "--",
            ":",
            "watch",
            "su",
            "timeout",
            "9",
            "busybox",
            "nice",
            "-n5",
            "python3",
            "cat",
            "/dev/stdin",
            "source",
            "exec",
        ];
        let operators = [" ", " ", " ", " ", " | ", " && ", " || ", "; ", ";"];
        // A fixed generator: the same lines every run.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..4000 {
            let mut line = String::new();
            for _ in 0..1 + next(9) {
                line.push_str(words[next(words.len())]);
                line.push_str(operators[next(operators.len())]);
            }
            lines.push(line.trim().to_string());
        }
        lines
    }

    #[test]
    fn the_plain_reader_reads_as_the_parser_does() {
        let (cwd, home) = (Path::new("/p/sub"), Some(Path::new("/home/u")));
        let mut plain = 0;
        for line in lines_to_compare() {
            // Plain words are read without the parser in any line.
            assert_eq!(
                read_now(&line, cwd, home),
                read_with_parser(&line, cwd, home),
                "plain words read differently in {line:?}"
            );
            let Some(read) = read_plain(&line, cwd, home) else {
                continue;
            };
            plain += 1;
            assert_eq!(
                read,
                read_with_parser(&line, cwd, home),
                "the plain reader and the parser differ on {line:?}"
            );
        }
        assert!(plain > 2000, "only {plain} plain lines");
    }

    #[test]
    fn plain_lines_need_no_thread() {
        let (cwd, home) = (Path::new("/p"), Some(Path::new("/home/u")));
        let reading = Reading::start("cargo test --quiet && git status", cwd, home);
        let outcome = reading.0.outcome.lock().unwrap().take();
        if crate::runtime::tuning::fast_paths() {
            assert!(matches!(outcome, Some(Outcome::Read(Ok(_)))));
        } else {
            // HITL_FAST_PATHS=0: the parser's thread, as before the plain reader.
            assert!(matches!(outcome, Some(Outcome::Reading { .. })));
        }
        // Quotes, and a plain line nesting one that is not, go to the parser.
        for line in ["echo 'x'", "sudo bash -c if", "eval if true"] {
            let reading = Reading::start(line, cwd, home);
            let outcome = reading.0.outcome.lock().unwrap().take();
            assert!(matches!(outcome, Some(Outcome::Reading { .. })), "{line}");
        }
    }

    #[test]
    fn words_are_read_as_bash_reads_them() {
        assert_eq!(programs(r"\rm -rf /"), ["rm -rf /"]);
        assert_eq!(programs(r#"/bin/rm -rf "/""#), ["rm -rf /"]);
        assert_eq!(programs("rm -rf '/'"), ["rm -rf /"]);
        assert_eq!(programs(r#"rm -rf "$HOME""#), ["rm -rf /home/u"]);
        assert_eq!(programs("rm -rf ~/x"), ["rm -rf /home/u/x"]);
        assert_eq!(programs("r''m -r\"f\" $'\\x2f'"), ["rm -rf /"]);
        assert_eq!(programs("H=.helpers; echo x >> $H/config.toml"), ["echo x"]);
    }

    #[test]
    fn wrappers_are_taken_off() {
        for line in [
            "sudo -u root rm -rf /",
            "sudo -E -H rm -rf /",
            "env -u X rm -rf /",
            "env -i A=1 B=2 rm -rf /",
            "nice -n 5 rm -rf /",
            "timeout 9 rm -rf /",
            "timeout -s KILL 9 rm -rf /",
            "busybox rm -rf /",
            "doas rm -rf /",
            "nohup rm -rf /",
            "command rm -rf /",
            "exec rm -rf /",
            "time -p rm -rf /",
            "stdbuf -oL rm -rf /",
        ] {
            let got = programs(line);
            assert!(got.contains(&"rm -rf /".to_string()), "{line}: {got:?}");
        }
        assert_eq!(
            programs("echo / | xargs rm -rf"),
            ["echo /", "rm -rf {item}"]
        );
    }

    #[test]
    fn nested_lines_are_read() {
        for line in [
            "if true; then rm -rf /; fi",
            "! rm -rf /",
            "bash -lc \"rm -rf /\"",
            "sh -xc 'rm -rf /'",
            "eval 'rm -rf /'",
            "echo $(rm -rf /)",
            "echo `rm -rf /`",
            "echo ${X:-$(rm -rf /)}",
            "f() { rm -rf /; }",
            "(cd /tmp; rm -rf /)",
            "for x in 1; do rm -rf /; done",
            "cat <(rm -rf /)",
            "su -c 'rm -rf /'",
            "watch rm -rf /",
            "find . -exec rm -rf / \\;",
        ] {
            let got = programs(line);
            assert!(got.contains(&"rm -rf /".to_string()), "{line}: {got:?}");
        }
    }

    #[test]
    fn downloads_are_followed_into_what_runs_them() {
        let program = |line: &str, name: &str| {
            read(line, Path::new("/p"), None)
                .unwrap()
                .commands
                .iter()
                .flat_map(Command::programs)
                .find(|p| p.name == name)
                .unwrap()
        };
        assert!(program("curl x | sudo -E bash", "bash").input.downloaded);
        let bash = program("bash -c \"$(curl -fsSL x)\"", "bash");
        assert!(bash.shell_invocation().command.unwrap().downloaded);
        let sh = program("sh <(curl x)", "sh");
        assert!(sh.shell_invocation().script.unwrap().downloaded);
    }

    #[test]
    fn the_folder_follows_cd() {
        let line = read(
            "cd / && rm -rf tmp; cd; ls",
            Path::new("/p"),
            Some(Path::new("/home/u")),
        )
        .unwrap();
        let cwds: Vec<_> = line.commands.iter().map(|c| c.cwd.clone()).collect();
        assert_eq!(cwds[1], Some(PathBuf::from("/")));
        assert_eq!(cwds[3], Some(PathBuf::from("/home/u")));
        let line = read("cd \"$X\"; rm -rf y", Path::new("/p"), None).unwrap();
        assert_eq!(line.commands[1].cwd, None);
    }

    #[test]
    fn fork_bombs_are_seen() {
        let line = read(":(){ :|:& };:", Path::new("/p"), None).unwrap();
        assert_eq!(line.fork_bombs, [":"]);
        let line = read("f() { echo hi; }; f", Path::new("/p"), None).unwrap();
        assert!(line.fork_bombs.is_empty());
    }

    #[test]
    fn unreadable_lines_are_errors() {
        assert!(read("echo \"unterminated", Path::new("/p"), None).is_err());
        assert!(read("if true; then", Path::new("/p"), None).is_err());
        // What the fuzzer found: an fd number the parser cannot hold (it panicked),
        // and unclosed parentheses (it backtracked for ever).
        assert!(read("echo 5555555555555555555555> .env", Path::new("/p"), None).is_err());
        let started = std::time::Instant::now();
        assert!(
            read(
                &format!("f(){}exec rm", "(".repeat(40)),
                Path::new("/p"),
                None
            )
            .is_err()
        );
        for hang in ["x $(cat <<\t && y #)z", "p <<\u{c}() { f "] {
            assert!(read(hang, Path::new("/p"), None).is_err(), "{hang:?}");
        }
        assert!(read("cat <<-EOF\n\tx\nEOF\necho a<<<b", Path::new("/p"), None).is_ok());
        let heredoc = format!("psql <<EOF\necho $({}cu; f\nEOF\n", "(".repeat(30));
        assert!(read(&heredoc, Path::new("/p"), None).is_err());
        let word = format!("echo \"$({}x\"", "(".repeat(30));
        assert!(read(&word, Path::new("/p"), None).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(read("echo '(((' \"(((\" \\(\\(\\( # (((", Path::new("/p"), None).is_ok());
        let deep = format!("{}ls{}", "$(".repeat(40), ")".repeat(40));
        assert!(read(&deep, Path::new("/p"), None).is_err());
    }
}
