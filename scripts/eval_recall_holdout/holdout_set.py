"""A held-out recall set: memory entries people keep, and questions worded apart from them.

Each question shares no word (nor word stem) with its target entry, stop words aside;
`check_disjoint` enforces it. UNRELATED holds questions no entry answers, to look for
entries that turn up as matches where they do not belong.
"""

from __future__ import annotations

import re

# (key, title, body)
ENTRIES: list[tuple[str, str, str]] = [
    (
        "node_pin",
        "Node version for the web app",
        "The web app is pinned to Node 20.11 via .nvmrc; run nvm use first.",
    ),
    (
        "web_deps",
        "Installing dependencies in web/",
        "Use pnpm install --frozen-lockfile inside web/. Plain npm rewrites the lockfile.",
    ),
    (
        "py_tooling",
        "Python tooling",
        "Backend uses Python 3.12 with uv: uv sync, then uv run pytest.\n"
        "Ruff for lint, line length 100. Mypy strict on the core package.",
    ),
    (
        "java_billing",
        "Billing service is Java",
        "The billing service is Java 17 on Gradle 8.5; ./gradlew build -x test for quick checks.",
    ),
    (
        "release_ok",
        "Release approval",
        "Priya Raman approves every production release; nothing ships without her OK in #releases.",
    ),
    (
        "soc2",
        "External audit",
        "SOC 2 audit fieldwork with Deloitte starts March 9.\n"
        "Evidence folder must be complete by March 2; Jonas collects it.",
    ),
    (
        "oncall",
        "On-call rotation",
        "On-call rotates weekly on Mondays at 10:00. Schedule lives in PagerDuty, team platform.\n"
        "Swaps are agreed in #oncall and entered by the person giving away the week.",
    ),
    (
        "two_reviews",
        "Code review rule",
        "Two approvals needed on PRs touching payments/; one is enough elsewhere.",
    ),
    (
        "branches",
        "Branch names",
        "Branches are named feat/<ticket>-slug or fix/<ticket>-slug, Jira key in capitals.",
    ),
    (
        "commits",
        "Commit messages",
        "Conventional Commits (feat:, fix:, chore:), subject under 72 chars, imperative mood.",
    ),
    (
        "deploy_window",
        "Deploy window",
        "Production deploys only Tue-Thu, 09:00-15:00 CET. No deploys Fridays or before holidays.",
    ),
    (
        "staging",
        "Staging server",
        "staging.internal.acme.io; ssh as deploy@ through bastion.acme.io port 2222.",
    ),
    (
        "replica",
        "Database access",
        "Read-only Postgres replica at db-ro.acme.io:5432.\n"
        "Credentials are in the 1Password vault Backend; rotate them every 90 days.",
    ),
    (
        "ci",
        "CI pipeline",
        "CI runs on GitHub Actions; the slow e2e job only runs on main.\n"
        "Re-run flaky jobs by adding the retry label.",
    ),
    ("manager", "Manager", "My manager is Tomas Ortega; 1:1 every other Thursday at 14:00."),
    (
        "design_sys",
        "Design system owner",
        "Lena Fischer owns the Figma component library; ask her before adding components.",
    ),
    (
        "security",
        "Security questions",
        "Security reviews go to Ahmed Khan, security@acme.io; answer within 3 working days.",
    ),
    (
        "q3_launch",
        "Q3 launch deadline",
        "Mobile app v2 must be in the App Store by September 30.\nCode freeze September 16.",
    ),
    (
        "taxes",
        "Taxes",
        "Tax return due July 31 this year. Accountant: Martin at Becker & Partner;\n"
        "he needs all receipts by June 15.",
    ),
    ("editor", "Editor", "I use Neovim with LazyVim; don't suggest VS Code extensions."),
    ("answers", "How I like answers", "Short answers first, then details. No emojis. Metric units."),
    ("tz", "Time zone", "I live in Berlin (CET/CEST). Calls only between 09:00 and 17:00 local."),
    ("allergy", "Allergies", "Allergic to penicillin and peanuts. Carry the EpiPen on trips."),
    (
        "gp",
        "GP",
        "Family doctor: Dr. Weber, Praxis am Park, +49 30 1234567.\n"
        "Appointments through Doctolib; repeat prescriptions by email.",
    ),
    (
        "lisbon",
        "Lisbon trip",
        "TAP TP541 to Lisbon on May 12, 07:05 from BER.\n"
        "Hotel Memmo Alfama, booking ref 8XK2Q, three nights.\n"
        "Return TP546 on May 15 at 18:40.",
    ),
    ("passport", "Passport", "Expires 2027-02-11; renewal takes about six weeks at the Buergeramt."),
    (
        "rent",
        "Rent",
        "Landlady Frau Schmidt; 1,250 EUR due on the 3rd by standing order from the N26 account.",
    ),
    (
        "home_net",
        "Home network",
        "Router is a FritzBox 7590, admin at fritz.box.\nGuest network Gast, its key is on the fridge.",
    ),
    (
        "car",
        "Car service",
        "VW Golf: next inspection due in October at Autohaus Nord. TUEV expires January 2027.",
    ),
    ("knee", "Exercise", "Running Tue/Thu 7am, bouldering Saturdays. Knee injury: avoid downhill runs."),
    ("sister_bday", "Anna's birthday", "Anna (sister) turns 35 on August 22. She likes ceramics and gin."),
    ("coffee", "Coffee order", "Oat flat white, no sugar."),
    (
        "vpn",
        "VPN",
        "WireGuard config is in ~/.config/wg/acme.conf; connect before touching anything internal.",
    ),
    (
        "cloud_acct",
        "AWS accounts",
        "Prod is account 4411-2093-7710, sandbox 8820-1144-3391.\n"
        "Use SSO profile acme-prod only via aws-vault.",
    ),
    ("logs", "Where logs live", "Application logs go to Grafana Loki; dashboards under the Platform folder."),
    (
        "feature_flags",
        "Feature flags",
        "Flags live in LaunchDarkly. Remove a flag within two sprints after full rollout.",
    ),
    ("standup", "Standup", "Daily standup 09:30 on Google Meet; async update in #team-core on Fridays."),
    (
        "expenses",
        "Expense claims",
        "Submit receipts in Personio by the 5th of the following month; over 500 EUR needs Tomas.",
    ),
    ("vacation_days", "Holiday allowance", "28 days per year; 6 left for this year, they lapse March 31."),
    (
        "kid_school",
        "School pickup",
        "Mila finishes at 15:15 Mon-Thu and 12:30 on Fridays; Tuesday is my turn to collect her.",
    ),
    # distractors: nothing asks for these
    (
        "docker",
        "Docker setup",
        "Use docker compose v2 (docker compose, not docker-compose). Images are built for arm64 and amd64.",
    ),
    (
        "k8s",
        "Kubernetes",
        "Clusters: eks-prod-eu and eks-staging-eu. kubectl contexts named after them.\n"
        "Never kubectl edit in prod; change the Helm values in infra/ instead.",
    ),
    ("terraform", "Terraform", "Terraform 1.7, state in S3 bucket acme-tf-state with DynamoDB locking."),
    ("go_version", "Go services", "The ingest service is Go 1.22. make lint runs golangci-lint."),
    ("rust_cli", "Rust CLI", "The acme CLI is Rust (edition 2021), released with cargo-dist."),
    (
        "api_versioning",
        "API versioning",
        "Public API is versioned in the path (/v1, /v2). Breaking changes need an RFC.",
    ),
    (
        "rfc_process",
        "RFCs",
        "RFCs live in docs/rfcs; one week comment period, decided in the Thursday architecture sync.",
    ),
    (
        "hiring",
        "Hiring loop",
        "Interview loop: screen, take-home, system design, values. Scorecards in Greenhouse within 24h.",
    ),
    (
        "intern",
        "Intern",
        "Kofi is our intern until December; he works on the CSV importer. Pair with him on Wednesdays.",
    ),
    (
        "marketing",
        "Marketing contact",
        "Sofia Lind runs marketing; blog posts go through her two weeks before publishing.",
    ),
    (
        "support_rota",
        "Customer support escalations",
        "Tier-2 tickets escalate to the team channel; respond within 4 business hours.",
    ),
    ("sla", "Uptime target", "SLO is 99.9% monthly for the public API; error budget burn alerts at 2x."),
    (
        "incident",
        "Incident process",
        "Sev1: page the incident commander, open a Zoom bridge, post updates every 30 minutes.\n"
        "Postmortem within 5 working days, blameless.",
    ),
    ("linting_js", "Frontend lint", "ESLint flat config plus Prettier; run pnpm lint before pushing."),
    ("storybook", "Storybook", "Storybook deploys to Chromatic on every PR."),
    (
        "i18n",
        "Translations",
        "Strings live in locales/*.json; German and French are reviewed by Lokalise vendors.",
    ),
    (
        "analytics",
        "Product analytics",
        "Events go to PostHog; names are snake_case verb_object, e.g. invoice_created.",
    ),
    ("dentist", "Dentist", "Dr. Yilmaz, cleaning every six months; next one in November."),
    ("insurance", "Health insurance", "TK member number A123456789; the card is in the blue wallet."),
    ("plants", "Plants", "Water the monstera weekly, the cactus once a month."),
    ("cat", "Cat", "Miso eats wet food twice a day; vet is Tierarztpraxis Kreuzberg."),
    ("bike", "Bike", "Commuter bike lock code 4471; tyres 28 mm, 6 bar."),
    ("groceries", "Groceries", "Weekly shop on Saturday at the organic market; we are vegetarian at home."),
    ("books", "Reading list", "Currently reading The Overstory. Next: Piranesi, then Project Hail Mary."),
    ("language", "Learning Spanish", "Duolingo daily, tutor Carmen on Wednesdays 19:00 via italki."),
    ("newsletter", "Newsletters", "Only keep Stratechery and Money Stuff; unsubscribe from the rest."),
    ("bank", "Banking", "Main account N26, savings at ING; joint account with Sam for household costs."),
    (
        "partner",
        "Sam",
        "Sam (partner) works shifts at the hospital; check the shared calendar before planning evenings.",
    ),
    ("parents", "Parents", "Mum and Dad live in Leipzig; call on Sunday evenings."),
    ("laptop", "Work laptop", "MacBook Pro M3, asset tag ACME-0412. IT ticket for anything hardware."),
    ("monitor", "Desk setup", "Two 27-inch screens; standing desk preset 2 is my height."),
    ("keyboard", "Keyboard layout", "I type on US layout with a German umlaut layer on right alt."),
    ("shell", "Shell", "zsh with starship prompt; aliases in ~/.zshrc.local."),
    (
        "git_signing",
        "Signed commits",
        "Commits are signed with an SSH key; the public key is registered with GitHub.",
    ),
    (
        "dependabot",
        "Dependency updates",
        "Renovate opens grouped PRs on Monday; merge patch updates after CI passes.",
    ),
    (
        "perf_budget",
        "Web performance",
        "Largest contentful paint under 2.5 s on 4G; bundle size checked by size-limit.",
    ),
    ("a11y", "Accessibility", "WCAG 2.1 AA. Every new page gets an axe check in the e2e suite."),
    ("search", "Search backend", "Product search runs on OpenSearch 2.11, reindexed nightly at 02:00."),
    ("queue", "Message queue", "Jobs go through SQS; dead letters after 5 attempts, inspected each morning."),
    ("backups", "Backups", "Nightly Postgres snapshots kept 35 days; restore drill every quarter."),
]

# (key of the entry that answers it, question)
QUESTIONS: list[tuple[str, str]] = [
    ("node_pin", "which JS runtime release do I need for the frontend?"),
    ("web_deps", "what do I run to set up packages for the frontend?"),
    ("py_tooling", "how do I execute the unit tests on the server side?"),
    ("java_billing", "what language is the invoicing component written in?"),
    ("release_ok", "who has to give the green light before a new version goes live?"),
    ("soc2", "when do the compliance people come in?"),
    ("oncall", "how can I get someone to cover for me during my support shift?"),
    ("two_reviews", "how many people have to okay a merge request for the money stuff?"),
    ("branches", "what prefix goes on a git ref for a bug repair?"),
    ("commits", "how should I word the summary line when I save my work in git?"),
    ("deploy_window", "is it okay to ship live at the end of the week?"),
    ("staging", "how do I get a shell on the pre-prod box?"),
    ("replica", "how do I get into the analytics SQL mirror?"),
    ("ci", "the browser tests didn't execute on my pull request, why?"),
    ("manager", "who is my boss and when do we meet?"),
    ("design_sys", "who should I talk to first if I want a new button style?"),
    ("security", "who looks at vulnerability stuff?"),
    ("q3_launch", "when must the iOS rewrite be submitted?"),
    ("taxes", "by what date does the bookkeeper want my paperwork?"),
    ("editor", "which IDE do I prefer?"),
    ("answers", "should replies be long or brief?"),
    ("tz", "what hours am I available for meetings?"),
    ("allergy", "any medicines I must not take?"),
    ("gp", "who is my general physician and how do I book a visit?"),
    ("lisbon", "when does my plane to Portugal leave?"),
    ("passport", "when does my travel document run out?"),
    ("rent", "how much do I pay for the apartment each month?"),
    ("home_net", "how do I let visitors onto the internet at my place?"),
    ("car", "when does the vehicle have its upcoming check-up?"),
    ("knee", "what workouts should I skip because of my leg?"),
    ("sister_bday", "what gift could I get for my sibling, and when?"),
    ("coffee", "what do I usually drink at the cafe?"),
    ("vpn", "how do I reach the company network from home?"),
    ("cloud_acct", "which amazon number is the live one?"),
    ("logs", "where can I see what the app printed when it crashed?"),
    ("feature_flags", "where do we toggle things on and off for users?"),
    ("standup", "what time is the morning sync every day?"),
    ("expenses", "how do I get reimbursed for a work dinner?"),
    ("vacation_days", "how much time off do I still have?"),
    ("kid_school", "when do I fetch my daughter?"),
]

# questions no entry answers
UNRELATED: list[str] = [
    "how do I convert a python list to a set?",
    "what's a good recipe for lasagna?",
    "explain the difference between TCP and UDP",
    "what is the capital of Australia?",
    "how does quicksort work?",
    "write a haiku about autumn",
    "what's the weather like on Mars?",
    "how do I center a div with flexbox?",
    "recommend a podcast about history",
    "what is the derivative of x squared?",
]

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "it",
        "its",
        "is",
        "are",
        "was",
        "be",
        "do",
        "does",
        "did",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "not",
        "no",
        "with",
        "from",
        "by",
        "as",
        "when",
        "what",
        "who",
        "how",
        "which",
        "where",
        "why",
        "can",
        "could",
        "should",
        "must",
        "any",
        "and",
        "there",
        "this",
        "that",
        "some",
        "get",
        "he",
        "she",
        "her",
        "him",
        "they",
        "them",
        "us",
    ]
)


def _stem(word: str) -> str:
    for suffix in ("ings", "ing", "ers", "er", "ies", "es", "ed", "s", "ly", "ion"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def words(text: str) -> set[str]:
    """The text's words, lower-cased, stop words left out."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS}


def overlap(question: str, entry_text: str) -> set[str]:
    """Question words sharing a word or stem (or a stem prefix of 4+) with the entry."""
    found: set[str] = set()
    entry_stems = {_stem(w) for w in words(entry_text)}
    for word in words(question):
        stem = _stem(word)
        for other in entry_stems:
            shorter, longer = sorted((stem, other), key=len)
            if stem == other or (len(shorter) >= 4 and longer.startswith(shorter)):
                found.add(word)
    return found


def check_disjoint() -> list[str]:
    """Each question that shares a word with its target, with those words."""
    by_key = {key: f"{title}\n{body}" for key, title, body in ENTRIES}
    problems = []
    for key, question in QUESTIONS:
        shared = overlap(question, by_key[key])
        if shared:
            problems.append(f"{key}: {sorted(shared)}")
    return problems


if __name__ == "__main__":
    print("\n".join(check_disjoint()) or "all questions disjoint from their targets")
    print(len(ENTRIES), "entries,", len(QUESTIONS), "questions")
