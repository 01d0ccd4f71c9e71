"""`tacit eval choice|retrieval|refusal|answers|ablate`: measure Tacit on labelled data.

The scoring, caching and reports are core/eval; this module wires the real systems in: the
answer pipeline and the LLM alone (choice), the retriever (retrieval), the gate's fitting code
(refusal), the whole chat path — gate, then answer — (answers), and settings overrides
validated as new Settings (ablate).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import tomllib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import prompts
from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from bot.settings import Settings
from core.answer.events import Answer, Final
from core.conversation import FinalReply, Message, Refusal
from core.errors import ConfigError, InputError, TacitError
from core.eval import datasets
from core.eval.ablation import apply_overrides, parse_plan
from core.eval.answers import ChatOutcome, answers_table, run_answers, summarise_answers
from core.eval.cache import ResultCache, fingerprint, result_key
from core.eval.report import RunReport, require_chart_library, summary_line, table, write_reports
from core.eval.runs import (
    DEFAULT_BUDGET,
    METHODS,
    AskChoice,
    ChoiceReply,
    RankedChunk,
    Search,
    run_choice,
    run_retrieval,
    summarise_choice,
    summarise_retrieval,
)
from core.language.text import count_tokens, detect_language
from core.model_output import clean_text_reply

if TYPE_CHECKING:
    from bot.wiring import Services
    from core.retrieve.context import ScoredChunk

eval_app = typer.Typer(
    name="eval",
    help="Measure Tacit on labelled data: QA accuracy, refusal F1, multi-hop recall, answers "
    "to chat messages, ablations.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")

FileArgument = Annotated[Path, typer.Argument(help="Questions, JSONL.", show_default=False)]
LimitOption = Annotated[
    int | None, typer.Option("--limit", min=1, help="Only the first N questions.")
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Write results.json and report.md here, and cache each question's result here "
        "so an interrupted run resumes.",
    ),
]
ConcurrencyOption = Annotated[
    int, typer.Option("--concurrency", min=1, max=64, help="Questions evaluated at once.")
]
NO_LLM_HINT = (
    "set [llm] base_url (TACIT_LLM__BASE_URL) to an OpenAI-compatible endpoint, with "
    "model (TACIT_LLM__MODEL) and api_key (TACIT_LLM__API_KEY) as it needs"
)
# Settings that change how fast or where, not what an evaluation measures.
_NOT_MEASURED = ("slack", "telegram", "server", "conversation", "state", "config_file", "log_level")
_LLM_PLUMBING = ("timeout", "max_retries", "concurrency", "cache", "api_key")


async def _fingerprint(
    config: Settings, services: Services, kb: str, options: dict[str, Any]
) -> str:
    """What a result depends on besides its question: the settings that change answers, the
    evaluation's options, and the KB's size (a re-indexed KB is evaluated afresh)."""
    data = {k: v for k, v in config.masked().items() if k not in _NOT_MEASURED}
    data["llm"] = {k: v for k, v in data["llm"].items() if k not in _LLM_PLUMBING}
    chunks = await services.vectors.count("chunks", kb)
    return fingerprint({"settings": data, "options": options, "kb": kb, "chunks": chunks})


@contextmanager
def _progress(label: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr (stdout stays clean for --json); yields 'one more done'."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)


@asynccontextmanager
async def _services(
    config: Settings, kb: str, *, needs_llm: str | None, index: Sequence[str] = ()
) -> AsyncIterator[Services]:
    """The services, checked: an LLM when the kind needs one, a KB with documents in it (after
    indexing `index` into it: an ablation run may name what its KB is built from)."""
    from bot.wiring import open_services

    async with open_services(config) as services:
        if needs_llm and services.llm is None:
            raise ConfigError(f"{needs_llm} needs an LLM", hint=NO_LLM_HINT)
        if index:
            err.print(f"[dim]indexing {', '.join(index)} into '{kb}'…[/]", markup=True)
            report = await services.indexer(kb).index(kb, [Path(p) for p in index])
            if report.failed:
                err.print(f"[yellow]note:[/] {len(report.failed)} files were not indexed")
        if await services.vectors.count("chunks", kb) == 0:
            raise InputError(
                f"knowledge base {kb!r} is empty",
                hint=f"index documents first: tacit index --kb {kb} PATH",
            )
        yield services


async def _final(events: AsyncIterator[Any]) -> Answer:
    final: Answer | None = None
    async for event in events:
        if isinstance(event, Final):
            final = event.answer
    assert final is not None, "answering always ends with a Final event"
    return final


# --- the three kinds ---------------------------------------------------------------------------


async def _choice(
    config: Settings, kb: str, options: dict[str, Any], cache: ResultCache, name: str
) -> RunReport:
    items = datasets.read_choice(Path(options["file"]), options.get("limit"))
    index = options.get("index", ())
    async with _services(config, kb, needs_llm="tacit eval choice", index=index) as services:
        answerer, llm = services.answerer(), services.llm
        assert llm is not None  # _services checked

        async def with_retrieval(question: str) -> ChoiceReply:
            language = detect_language(question)
            asked = prompts.render("eval_choice_ask", language, question=question)
            answer = await _final(answerer.ask(kb, asked.messages[-1].content))
            return ChoiceReply(answer.text, answer.refused, answer.mode)

        async def llm_only(question: str) -> ChoiceReply:
            prompt = prompts.render("eval_choice", detect_language(question), question=question)
            completion = await llm.chat(
                prompt, temperature=config.llm.temperature, max_tokens=config.llm.max_tokens
            )
            return ChoiceReply(completion.text)

        systems: dict[str, AskChoice] = {"retrieval": with_retrieval}
        if options.get("baseline", True):
            systems["llm_only"] = llm_only
        with _progress(f"{name}: questions", len(items)) as advance:
            results = await run_choice(
                items,
                systems,
                cache=cache,
                fingerprint=await _fingerprint(config, services, kb, {}),
                concurrency=options.get("concurrency", 4),
                advance=advance,
            )
    summary = summarise_choice(results, list(systems))
    return RunReport(name, "choice", kb, summary, results, _shown(options))


def _search(services: Services, kb: str, method: str, top_k: int) -> Search:
    retriever = services.retriever()

    async def search(question: str) -> Sequence[RankedChunk]:
        scored: Sequence[ScoredChunk]
        if method == "dense":
            scored = await retriever.dense_chunks(kb, question, top_k=top_k)
        elif method == "hybrid":
            scored = await retriever.hybrid_chunks(kb, question, top_k=top_k)
        else:
            scored = (await retriever.retrieve(kb, question)).chunks
        return [
            RankedChunk(
                s.chunk.source, s.chunk.text, s.chunk.tokens or count_tokens(s.chunk.text), s.score
            )
            for s in scored
        ]

    return search


async def _retrieval(
    config: Settings, kb: str, options: dict[str, Any], cache: ResultCache, name: str
) -> RunReport:
    items = datasets.read_retrieval(Path(options["file"]), options.get("limit"))
    method = options.get("method", "full")
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    budget = int(options.get("budget", DEFAULT_BUDGET))
    top_k = int(options.get("top_k", 20))
    index = options.get("index", ())
    async with _services(config, kb, needs_llm=None, index=index) as services:
        llm = services.llm

        async def answer(question: str, context: Sequence[RankedChunk]) -> str:
            prompt = prompts.render(
                "eval_answer",
                detect_language(question),
                question=question,
                passages=[c.text for c in context],
            )
            assert llm is not None
            completion = await llm.chat(prompt, temperature=0.0, max_tokens=64)
            return clean_text_reply(completion.text)

        answers = llm is not None and options.get("answers", True)
        with _progress(f"{name}: questions", len(items)) as advance:
            results = await run_retrieval(
                items,
                _search(services, kb, method, top_k),
                cache=cache,
                fingerprint=await _fingerprint(
                    config, services, kb, {"method": method, "top_k": top_k}
                ),
                budget=budget,
                answer=answer if answers else None,
                concurrency=options.get("concurrency", 4),
                advance=advance,
            )
    summary = {"method": method, **summarise_retrieval(results, budget)}
    return RunReport(name, "retrieval", kb, summary, results, _shown(options))


async def _refusal(
    config: Settings, kb: str, options: dict[str, Any], cache: ResultCache, name: str
) -> RunReport:
    from bot.wiring import build_state
    from core.eval.refusal import cross_validated

    good = datasets.read_messages(Path(options["good"]))
    bad = datasets.read_messages(Path(options["bad"]))
    folds, seed = int(options.get("folds", 5)), int(options.get("seed", 0))
    index = options.get("index", ())
    async with _services(config, kb, needs_llm=None, index=index) as services:
        key = result_key(
            "refusal",
            *good,
            "\x1e",
            *bad,
            str(folds),
            str(seed),
            await _fingerprint(config, services, kb, {}),
        )
        cached = cache.get(key)
        if cached is None:
            state = await build_state(config)
            try:
                gate = services.gate(state)
                texts, labels, embeddings, kb_rows, _ = await gate.labelled(kb, good, bad)
            finally:
                await state.aclose()
            cached = cross_validated(texts, labels, embeddings, kb_rows, folds=folds, seed=seed)
            cache.put(key, cached)
    return RunReport(name, "refusal", kb, cached["summary"], cached["results"], _shown(options))


# The channel `tacit eval answers` asks in: an HTTP channel bound to the evaluated KB, in a
# private state store (bot.wiring.build_scratch_state), so nothing reaches the team's log.
EVAL_WORKSPACE, EVAL_CHANNEL = "eval", "answers"
# What the bot is asked before the first timed message: it loads what a running bot has loaded
# before its first question (the KB's vectors in memory, the coverage rule's words).
_WARM_UP = "What does this knowledge base cover?"


async def _answers(
    config: Settings, kb: str, options: dict[str, Any], cache: ResultCache, name: str
) -> RunReport:
    from bot.assistant import TacitAssistant
    from bot.conversation_state import ConversationState
    from bot.settings import ChannelSettings
    from bot.wiring import build_scratch_state, build_state
    from core.gate.store import fit_stamp

    items = datasets.read_answers(Path(options["file"]), options.get("limit"))
    index = options.get("index", ())
    overheard = bool(options.get("overheard", False))
    async with (
        _services(config, kb, needs_llm=None, index=index) as services,
        AsyncExitStack() as stack,
    ):
        # as `tacit serve` does: the coverage rule embeds the KB's words ahead of messages
        rule = services.coverage_rule(warm=True)
        stack.push_async_callback(rule.aclose)
        home_state = await build_state(config)  # the KB's gate fit and labels live here
        stack.push_async_callback(home_state.aclose)
        scratch_dir = Path(tempfile.mkdtemp(prefix="tacit-eval-"))
        stack.callback(shutil.rmtree, scratch_dir, True)
        scratch = await build_scratch_state(scratch_dir)
        stack.push_async_callback(scratch.aclose)
        conversation = config.conversation.model_copy(
            update={
                "channels": {
                    f"http:{EVAL_WORKSPACE}:{EVAL_CHANNEL}": ChannelSettings(
                        kb=kb, mode="auto" if overheard else "mention"
                    )
                },
                # every message is one asker's: the limits meant for a chat would refuse most
                "user_rate": 1_000_000_000,
                "channel_rate": 1_000_000_000,
            }
        )
        state = ConversationState(scratch, conversation, default_kb=kb)
        assistant = TacitAssistant(
            state, services.answerer(in_memory=True), gate=services.gate(home_state)
        )
        llm = services.llm

        def used() -> tuple[int, int]:
            if llm is None:
                return 0, 0
            usage = llm.usage
            return usage.calls + usage.cached_calls, usage.prompt_tokens

        async def chat(text: str) -> tuple[FinalReply | Refusal, int, int]:
            calls, tokens = used()
            message_id = uuid.uuid4().hex
            message = Message(
                platform="http",
                workspace=EVAL_WORKSPACE,
                channel=EVAL_CHANNEL,
                thread=message_id,  # each message opens its own thread: no history
                user="eval",
                text=text,
                message_id=message_id,
                addressed=not overheard,
                sent_at=time.time(),
            )
            final: FinalReply | Refusal | None = None
            async for event in assistant.handle(message):
                if isinstance(event, FinalReply | Refusal):
                    final = event
            if final is None:
                raise TacitError("the chat ended without a reply")
            after_calls, after_tokens = used()
            return final, after_calls - calls, after_tokens - tokens

        async def converse(item: datasets.AnswerItem) -> ChatOutcome:
            final, calls, tokens = await chat(item.q)
            if isinstance(final, Refusal):
                decision = await state.log.get(final.trace_id) or {}
                if decision.get("outcome") == "error":
                    # a store or the model failed: an error of this run, retried by the next
                    raise TacitError(final.reason)
                return ChatOutcome(
                    True,
                    text=final.text or "",
                    reason=final.reason,
                    stage=str(decision.get("stage", "")),
                    llm_calls=calls,
                    prompt_tokens=tokens,
                )
            trace = await state.trace(final.trace_id) or {}
            return ChatOutcome(
                False,
                text=final.text,
                sources=tuple(c.source for c in final.citations),
                mode=str(trace.get("mode", "")),
                llm_calls=calls,
                prompt_tokens=tokens,
            )

        warm_up: dict[str, float] = {}

        async def prepare() -> None:
            started = time.perf_counter()
            await chat(_WARM_UP)
            await rule.warmed(kb)
            warm_up["seconds"] = round(time.perf_counter() - started, 3)

        measured: dict[str, Any] = {"fit": await fit_stamp(home_state, kb) or ""}
        if overheard:  # an addressed run keeps the results it cached before the option existed
            measured["overheard"] = True
        fingerprint = await _fingerprint(config, services, kb, measured)
        with _progress(f"{name}: messages", len(items)) as advance:
            results = await run_answers(
                items,
                converse,
                cache=cache,
                fingerprint=fingerprint,
                advance=advance,
                prepare=prepare,
            )
    summary = summarise_answers(results, items, with_llm=llm is not None)
    if warm_up:
        summary["warm_up_seconds"] = warm_up["seconds"]
    return RunReport(name, "answers", kb, summary, results, _shown(options))


KIND_RUNS = {"choice": _choice, "retrieval": _retrieval, "refusal": _refusal, "answers": _answers}


def _shown(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in ("concurrency",)}


async def _run_one(kind: str, options: dict[str, Any], out_dir: Path | None, as_json: bool) -> None:
    config = settings()
    name = kb_name(options.pop("kb", None), config)
    cache = ResultCache(out_dir / "cache.jsonl" if out_dir else None)
    report = await KIND_RUNS[kind](config, name, options, cache, kind)
    _finish([report], out_dir, f"tacit eval {kind}", cache, as_json=as_json, chart=False)


def _finish(
    runs: list[RunReport],
    out_dir: Path | None,
    title: str,
    cache: ResultCache,
    *,
    as_json: bool,
    chart: bool,
) -> None:
    written = write_reports(out_dir, runs, title=title, chart=chart) if out_dir else []
    if as_json:
        line = summary_line(runs, reused=cache.reused, files=written)
        print(json.dumps(line, ensure_ascii=False))
        return
    if len(runs) == 1 and runs[0].kind == "answers":
        out.print(answers_table(runs[0].summary), markup=False)
    else:
        out.print(table(runs), markup=False)
    if cache.reused:
        err.print(f"[dim]{cache.reused} results reused from an earlier run[/]", markup=True)
    for path in written:
        err.print(f"[dim]wrote {path}[/]", markup=True)


# --- commands ----------------------------------------------------------------------------------


@eval_app.command("choice")
@command
async def choice(
    file: FileArgument,
    kb: KbOption = None,
    limit: LimitOption = None,
    out_dir: OutOption = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="Also ask the LLM alone.")
    ] = True,
    concurrency: ConcurrencyOption = 4,
    as_json: JsonOption = False,
) -> None:
    """Single-choice QA accuracy: with retrieval, and of the LLM alone (the baseline).

    FILE is JSONL: {"question" with its options, "answer": the letter} (SeedBench QA-1).
    Both systems answer in the same run. Needs an LLM.
    """
    options = {"file": str(file), "kb": kb, "limit": limit, "baseline": baseline}
    await _run_one("choice", {**options, "concurrency": concurrency}, out_dir, as_json)


@eval_app.command("retrieval")
@command
async def retrieval(
    file: FileArgument,
    kb: KbOption = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="dense: chunk vectors only; hybrid: BM25 + dense; full: the retriever "
            "(dual-level with keywords, lexical, graph).",
        ),
    ] = "full",
    budget: Annotated[
        int, typer.Option("--budget", min=1, help="Context tokens for 'all supporting found'.")
    ] = DEFAULT_BUDGET,
    top_k: Annotated[
        int, typer.Option("--top-k", min=10, help="Chunks ranked by dense and hybrid.")
    ] = 20,
    answers: Annotated[
        bool,
        typer.Option("--answers/--no-answers", help="With an LLM: answer, score EM and F1."),
    ] = True,
    limit: LimitOption = None,
    out_dir: OutOption = None,
    concurrency: ConcurrencyOption = 4,
    as_json: JsonOption = False,
) -> None:
    """Multi-hop retrieval: recall@k, all supporting documents in the budget, EM/F1.

    FILE is JSONL: {"question", "supporting": a list of source ids, "answer" (optional)}, as
    bench/convert_hotpotqa.py and bench/convert_musique.py write it. EM and F1 need an LLM.
    """
    options = {
        "file": str(file),
        "kb": kb,
        "limit": limit,
        "method": method,
        "budget": budget,
        "top_k": top_k,
        "answers": answers,
    }
    await _run_one("retrieval", {**options, "concurrency": concurrency}, out_dir, as_json)


@eval_app.command("refusal")
@command
async def refusal(
    good: Annotated[Path, typer.Option("--good", help="Answerable messages, one per line.")],
    bad: Annotated[Path, typer.Option("--bad", help="Messages to stay silent on.")],
    kb: KbOption = None,
    folds: Annotated[int, typer.Option("--folds", min=2, max=50)] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Shuffles the folds.")] = 0,
    out_dir: OutOption = None,
    as_json: JsonOption = False,
) -> None:
    """The gate's precision, recall and F1 by k-fold cross-validation (fitted on k-1 folds,
    scored on the held-out one), beside the one-threshold similarity baseline."""
    options = {"good": str(good), "bad": str(bad), "kb": kb, "folds": folds, "seed": seed}
    await _run_one("refusal", options, out_dir, as_json)


@eval_app.command("answers")
@command
async def answers(
    file: FileArgument,
    kb: KbOption = None,
    limit: LimitOption = None,
    out_dir: OutOption = None,
    as_json: JsonOption = False,
    overheard: Annotated[
        bool,
        typer.Option(
            "--overheard",
            help="Send every message unaddressed, in a channel that answers all: the gate's "
            "overheard operating point (silent unless the KB clearly covers it).",
        ),
    ] = False,
) -> None:
    """Chat messages through the whole path (gate, then answer), graded: does Tacit answer
    what it should, right and cited, and stay out of the rest?

    FILE is JSONL, one message a line: {"id", "kind": "covered"|"uncovered"|"chatter", "q",
    "facts": [["alt", …], …], "source": [paths]}. Each is asked as an addressed message in a
    channel bound to the KB (with the LLM when one is configured); with --overheard, as a
    message nobody addressed to the bot, in a channel that answers all messages. A covered
    message is right when answered, holding one string of every facts group, citing a source
    that ends with one of "source"; uncovered and chatter are right when refused.
    """
    options = {"file": str(file), "kb": kb, "limit": limit}
    if overheard:
        options["overheard"] = True
    await _run_one("answers", options, out_dir, as_json)


@eval_app.command("ablate")
@command
async def ablate(
    plan_file: Annotated[Path, typer.Argument(help="Ablation plan, TOML.", show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", help="Reports, chart and cache go here.")],
    limit: LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """One evaluation per run of the plan, each with its settings overrides; one report row
    per run, and a chart."""
    require_chart_library()  # before the runs, which may take hours, not after them
    try:
        data = tomllib.loads(plan_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no such file: {plan_file}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{plan_file} is not valid TOML: {exc}") from None
    plan = parse_plan(data, plan_file.resolve().parent)
    base = settings()
    cache = ResultCache(out_dir / "cache.jsonl")
    # Every run's settings are checked before the first run starts.
    configs = [_overridden(base, run.settings, run.name) for run in plan.runs]
    reports: list[RunReport] = []
    for run, config in zip(plan.runs, configs, strict=True):
        options = dict(run.options)
        if limit is not None:
            options["limit"] = limit
        name = kb_name(options.pop("kb", None), config)
        report = await KIND_RUNS[plan.kind](config, name, options, cache, run.name)
        report.overrides = run.settings
        reports.append(report)
    _finish(reports, out_dir, f"Ablation: {plan_file.stem}", cache, as_json=as_json, chart=True)


def _overridden(base: Settings, overrides: dict[str, Any], run: str) -> Settings:
    """The base settings with dotted overrides, validated as a whole new Settings."""
    if not overrides:
        return base
    try:
        return Settings.model_validate(apply_overrides(base.model_dump(), overrides))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: "
            + ("unknown setting" if e["type"] == "extra_forbidden" else e["msg"])
            for e in exc.errors()
        )
        raise ConfigError(f"run {run!r}: invalid settings override ({problems})") from None
