"""`dreaming report`: what memory learned and why, as one self-contained HTML page.

Per agent, gathered from its state (read only): tonight's changes to memory with the text
before and after, every live entry's lineage (origins, evidence lines, decisions, the LLM
calls behind them), what was kept out and why, and LLM spend against the caps.

    _records    the frozen values the page is drawn from
    _build      one AgentReport per agent (runs, spend, the clock)
    _changes    decisions, tonight's changes, entries' lineage (`dreaming.memory.lineage` reads)
    _kept_out   sessions not admitted, the candidate funnel (`dreaming.memory.gates`)
    _html       the page: `prompts/report.html.j2`, autoescaped, with the spend chart
"""

from dreaming.report._build import agent_report, build_report
from dreaming.report._html import anchor, render, spend_charts, word_diff
from dreaming.report._records import (
    AgentReport,
    Call,
    Change,
    DaySpend,
    Decision,
    Entry,
    FunnelStep,
    Held,
    KeptOut,
    Origin,
    Report,
    Retired,
    Session,
    SessionGroup,
    Spend,
    Tonight,
)

__all__ = [
    "AgentReport",
    "Call",
    "Change",
    "DaySpend",
    "Decision",
    "Entry",
    "FunnelStep",
    "Held",
    "KeptOut",
    "Origin",
    "Report",
    "Retired",
    "Session",
    "SessionGroup",
    "Spend",
    "Tonight",
    "agent_report",
    "anchor",
    "build_report",
    "render",
    "spend_charts",
    "word_diff",
]
