"""A small built-in bridge between the words of a question and the words of a memory.

A user asks "which package manager for the web app?" of a memory that says "Use pnpm
with the lockfile committed": no word is shared, so the word search finds nothing. The
bridge adds, to the words of a query, words that name the same thing or a kind of it,
from short general-purpose lists of the things people keep in memory (tools,
languages, editors, package managers, people and roles, dates and deadlines, places,
health, travel, preferences, and the rest of everyday life):

- ``SAME``: words that mean the same (``db`` / ``database``, ``boss`` / ``manager``):
  each brings the others;
- ``KINDS``: a kind's words and the words of its members (``editor``: ``vim``,
  ``emacs``…). A word of the kind brings every member (and the kind's other words); a
  member brings only the kind's words, never its siblings (asking about ``python``
  must not find the memory about ``java``).

``EVERYDAY_SAME`` and ``EVERYDAY_KINDS`` are the same two kinds of list for the rest of
what people keep: home, family, health, money, travel, work admin, shops, labs, pastimes.

A word that reads as something else in everyday speech is marked ``?`` in a list
(``leave?`` among the holiday words, ``kitty?`` among the terminals, ``day?`` and
``time?`` among the date and time words): it brings that list only when the question
asks for it ("which day", "what time") or another of its words confirms the sense (a
word of the same list, or of the same line of ``SENSES``: "days of leave", "the
deadline for my hours"). Alone it brings nothing from that list, so "the start of the
day" does not bring every entry naming a weekday. A marked word is still added when
another word brings its list.

Words are looked up lower-cased, as written or without a plural or verb ending (SQLite's
porter stemmer then matches the added words' other forms). The added words are searched
apart from the query's own (``makad.service.context``), and an entry only they find
scores at most half what the best match on the query's own words scores
(``BRIDGED_WEIGHT``): below the good direct matches. Nothing here is learned or
downloaded: the lists are the whole of it, and no list is tuned to one workspace. Words
found in almost any memory ("never", "use", "work") are left out of them: each would
bring half the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from makad.core.cjk import ENGLISH_STOP_WORDS

# An entry the bridge alone finds weighs this much of what the same match on the query's
# own words would: below every direct match of the same strength.
BRIDGED_WEIGHT: Final = 0.5
# At most this many words are added to one query (the longest lists are kinds of tools).
MAX_BRIDGED_TERMS: Final = 96

_WORD: Final = re.compile(r"[a-z0-9][a-z0-9+#.\-]*[a-z0-9+#]|[a-z0-9]")

SAME: Final[tuple[str, ...]] = (
    "db database databases datastore",
    "prod production",
    "repo repository repos",
    "config configuration settings setup",
    "docs documentation handbook manual wiki",
    "auth authentication login signin sso",
    "env environment",
    "k8s kubernetes kube",
    "js javascript ecmascript",
    "ts typescript",
    "py python cpython",
    "pr mr diff patch?",
    "boss manager supervisor lead?",
    "colleague coworker teammate",
    "holiday holidays vacation leave? pto",
    "deadline due cutoff closes",
    "meeting call sync standup",
    "birthday anniversary",
    "present? gift",
    "doctor physician gp medic",
    "dentist dental",
    "medicine medication pill pills drug drugs prescription",
    "allergy allergic",
    "plane flight airline",
    "hotel accommodation stay? lodging",
    "car vehicle",
    "dog puppy pet",
    "cat kitten pet",
    "flat apartment home house",
    "salary pay compensation",
    "job employer",
    "computer laptop machine workstation",
    "display monitor screen",
    "font typeface",
    "theme colours colors scheme",
    "terminal shell console",
    "chat messaging",
    "email mail",
    "cert certificate tls ssl https",
    "secret secrets credential credentials token tokens password passwords key keys",
    "bug issue ticket",
    "backlog tracker",
    "release ship launch rollout",
    "version release",
    "test tests testing check checks",
    "lint linter linting",
    "format formatter formatting style",
    "deploy deployment ship",
    "container docker image?",
    "queue jobs? background? async asynchronous worker? workers?",
    "cache caching",
    "logs logging log",
    "metrics dashboards charts graphs monitoring observability",
    "alert alerts paging pager",
    "cost costs spend bill budget",
    "price pricing plan? plans?",
    "customer customers client clients",
    "translation translations localization localisation i18n l10n",
    "accessibility a11y",
    "analytics tracking telemetry",
    "backup backups snapshot snapshots",
    "food meal meals dinner lunch breakfast diet",
    "vegetarian vegan",
    "book? books reading",
    "talk presentation speaking keynote",
    "conference event? summit",
    "goal goals okr okrs objective",
    "retro retrospective",
    "hiring interview interviews recruiting candidates",
    "mentor mentoring mentee",
    "reply replies respond response answer answers",
    "short? brief? concise terse",
    "long? verbose detailed",
    "funding grant",
    "insurance cover? coverage",
    "bank banking",
    "passport visa",
    "keyboard layout keys",
    "prefer prefers preference preferences favourite favorite likes",
    "spouse wife husband partner",
    "sick ill illness",
    "phone mobile? cell?",
    "staging preprod",
    "server host? instance? vm",
    "storage bucket?",
    "timezone tz",
    "invoice invoices billing",
    "expires expiry expiration lapse renew renewal",
    "calendar agenda",
    "contract agreement",
    "weekend saturday sunday",
)

KINDS: Final[tuple[tuple[str, str], ...]] = (
    (
        "package packages dependency dependencies deps install installs installer lockfile",
        "npm pnpm yarn? bun? pip pipx poetry? uv conda pipenv cargo? gem? bundler composer maven gradle "
        "nuget brew homebrew apt dnf yum pacman nix",
    ),
    (
        "editor editors ide",
        "vim neovim nvim emacs vscode helix? sublime? intellij pycharm webstorm goland xcode nano? zed? "
        "jetbrains cursor?",
    ),
    (
        "language languages",
        "python javascript typescript java kotlin swift? go? golang rust? ruby? php csharp scala "
        "elixir haskell clojure dart? lua perl? sql bash?",
    ),
    # jdk and jvm name Java's runtime alone: as kind words, a question about Python would
    # bring the Java entry.
    ("interpreter runtime", "python cpython pypy node? nodejs deno bun? java jdk jvm ruby?"),
    ("browser browsers web internet", "firefox chrome chromium safari? brave?"),
    (
        "shell terminal prompt",
        "bash? zsh fish? nushell powershell iterm kitty? alacritty wezterm tmux starship?",
    ),
    ("os system? desktop?", "linux macos windows? fedora ubuntu debian arch? nixos silverblue"),
    (
        "database db sql relational",
        "postgres postgresql mysql mariadb sqlite oracle? mssql mongodb dynamodb cassandra?",
    ),
    ("cache", "redis memcached varnish?"),
    ("queue broker messaging async", "rabbitmq kafka sqs celery sidekiq nats pubsub"),
    ("cloud hosting provider", "aws gcp azure? hetzner digitalocean fly? heroku vercel netlify cloudflare"),
    (
        "kubernetes orchestration cluster",
        "eks gke aks helm argo argocd kubectl k3s",
    ),
    ("infrastructure iac provisioning", "terraform pulumi ansible cloudformation opentofu"),
    ("pipeline pipelines ci cd", "jenkins circleci gitlab actions? travis buildkite drone?"),
    (
        "monitoring metrics dashboards observability",
        "prometheus grafana datadog newrelic sentry? tempo? jaeger loki honeycomb?",
    ),
    ("tracker backlog tickets issues tasks", "jira linear? trello asana github youtrack clickup"),
    ("chat messaging", "slack? teams? discord mattermost zulip"),
    ("design mockups mockup prototype", "figma sketch zeplin"),
    ("notes notebook", "obsidian notion? evernote logseq onenote"),
    ("password passwords secrets vault", "1password bitwarden lastpass keepass vault?"),
    ("vpn tunnel", "wireguard openvpn tailscale"),
    (
        "formatter format formatting",
        "prettier black? ruff gofmt rustfmt clang-format biome?",
    ),
    ("linter lint linting", "eslint ruff flake8 pylint golangci-lint clippy rubocop stylelint mypy"),
    ("test tests testing runner", "pytest jest? vitest mocha? junit rspec playwright cypress?"),
    ("orm mapper", "sqlalchemy prisma hibernate django activerecord typeorm sequelize"),
    ("migration migrations schema", "alembic flyway liquibase"),
    ("framework", "django flask fastapi rails spring react vue angular svelte nextjs"),
    ("frontend web client ui", "react vue angular svelte nextjs css html"),
    ("backend server endpoint api service", "django flask fastapi rails spring express?"),
    ("mobile? app phone", "ios android swiftui uikit kotlin flutter"),
    ("analytics tracking", "posthog mixpanel amplitude plausible"),
    ("flag? flags? toggle toggles", "launchdarkly unleash? flagsmith"),
    ("support helpdesk", "zendesk intercom freshdesk"),
    ("localization translation", "crowdin lokalise transifex weblate"),
    ("backup backups", "restic borg? backblaze timemachine"),
    ("git host? hosting", "github gitlab codeberg bitbucket gitea"),
    ("license licence licensing", "mit? apache? gpl bsd mpl"),
    ("hardware computer machine?", "macbook thinkpad imac dell lenovo"),
    (
        "person? people? team? colleague",
        "cto ceo cfo vp head? lead? manager engineer designer owner? reviewer maintainer",
    ),
    ("leadership executive chief officer", "cto ceo cfo coo vp head?"),
    ("family relative relatives", "sister brother mother father mom dad wife husband partner son daughter"),
    ("child children kid kids", "son daughter"),
    (
        "date day? deadline schedule",
        "monday tuesday wednesday thursday friday saturday sunday january february march april "
        "may june july august september october november december today tomorrow weekly monthly",
    ),
    ("month", "january february march april may june july august september october november december"),
    ("weekday week", "monday tuesday wednesday thursday friday saturday sunday"),
    ("time? hour? clock? morning afternoon evening", "am pm noon midnight"),
    ("country", "canada germany portugal spain france italy japan usa uk"),
    ("city town", "lisbon berlin london paris toronto madrid vilnius tokyo"),
    ("trip travel", "flight hotel airport train?"),
    ("health medical", "doctor dentist allergy medication insurance clinic"),
    ("exercise workout sport", "gym climbing running cycling swimming yoga"),
    ("drink beverage", "coffee tea juice"),
    ("money finance", "bank? salary rent tax invoice budget"),
    ("currency", "eur euro euros usd dollar dollars gbp pound? pounds?"),
    ("timezone zone?", "utc gmt cet cest pst pdt est edt wet"),
    ("payment payments checkout", "stripe paypal adyen braintree"),
    ("email mail inbox", "gmail outlook fastmail protonmail"),
    ("storage", "s3 gcs minio"),
)


# The same two kinds of list for the notes people keep about the rest of their lives:
# home, family, health, money, travel, work admin, shops, labs and pastimes.
EVERYDAY_SAME: Final[tuple[str, ...]] = (
    "rubbish trash garbage waste bin? bins recycling refuse? litter",
    "boiler furnace heating heater",
    "fridge refrigerator",
    "laundry washer washing dryer",
    "neighbour neighbours neighbor neighbors",
    "warranty guarantee guaranteed",
    "alarm alarms detector detectors",
    "landlord landlady letting",
    "rent rental renting lease? leased? tenancy",
    "repair repairs fix? mend",
    "mum mom mother mummy mommy mama",
    "dad father daddy papa",
    "grandma grandmother granny gran nan? nana nanna",
    "grandpa grandfather grandad granddad",
    "babysitter childminder nanny childcare",
    "wedding married marriage",
    "teacher teachers tutor",
    "lesson lessons class? classes? tuition",
    "dentist dental teeth tooth",
    "eye eyes optician optometrist glasses spectacles eyesight vision?",
    "vaccine vaccines vaccination vaccinations jab jabs shot? shots? booster boosters immunisation "
    "immunization",
    "flu influenza",
    "pharmacy pharmacist chemist drugstore",
    "physio physiotherapy physiotherapist rehab",
    "carer carers caregiver",
    "booking booked reservation reservations reserve? reserved?",
    "appointment appointments",
    "train? trains? rail railway",
    "ticket? tickets? fare fares",
    "abroad overseas foreign",
    "luggage baggage suitcase",
    "commute commuting",
    "mortgage mortgages loan loans",
    "pension pensions retirement retire?",
    "savings saving?",
    "tax taxes taxation",
    "donation donations donate charity charities",
    "electricity electric energy power?",
    "accountant accountants bookkeeper accounting",
    "reimburse reimbursed reimbursement expense expenses claim? claims?",
    "salary wage wages payroll paid payslip paycheck",
    "office workplace",
    "permit permits badge?",
    "lab laboratory labs",
    "sample samples specimen specimens",
    "reagent reagents chemical chemicals",
    "sterilise sterilize sterilised sterilized sterilisation sterilization autoclave",
    "microscope microscopes microscopy imaging",
    "funder funders funding grant grants",
    "talk talks presentation presenting presents? speaking keynote seminar lecture",
    "shop shops store? stores? boutique",
    "till tills register?",
    "stock restock inventory",
    "supplier suppliers vendor vendors wholesaler",
    "buy buys buying purchase purchases purchasing procurement",
    "coffee espresso",
    "bike bikes bicycle bicycles cycling",
    "tyre tyres tire tires",
    "run? running jog jogging",
    "marathon race? races?",
    "choir chorus singing sing",
    "rehearsal rehearsals rehearse practice? practise?",
    "book? books novel? novels reading",
    "club clubs society circle?",
    "garden gardening allotment",
    "greenhouse glasshouse",
    "veg vegetable vegetables",
    "cat cats kitten kitty",
    "vet? vets veterinary veterinarian",
)

EVERYDAY_KINDS: Final[tuple[tuple[str, str], ...]] = (
    ("appliance appliances", "fridge freezer washer dryer dishwasher oven cooker microwave kettle boiler"),
    (
        "family relative relatives",
        "mum mom dad grandma grandmother granny nan grandpa grandfather aunt uncle cousin niece nephew "
        "grandson granddaughter",
    ),
    ("child children kid kids", "toddler baby"),
    ("school", "teacher class? lesson homework pupil pupils term?"),
    (
        "medicine medication pill pills drug drugs prescription meds tablet tablets antibiotic antibiotics",
        "penicillin amoxicillin ibuprofen paracetamol aspirin insulin statin amlodipine",
    ),
    ("health medical", "dentist optician pharmacy physio vaccine gp nurse"),
    ("trip travel journey", "passport luggage ticket? abroad"),
    ("money finance", "mortgage pension savings loan donation"),
    ("currency currencies cash money", "eur euro euros usd dollar dollars gbp"),
    ("tax taxes", "vat gst hmrc irs"),
    ("utility? utilities?", "electricity gas? water? broadband"),
    ("instrument? instruments? music", "guitar piano violin drums ukulele cello flute saxophone"),
    ("flowers flower", "lilies lily roses rose tulips tulip daisies orchids"),
    ("dairy", "milk cheese butter yoghurt yogurt cream"),
    ("pet pets animal animals", "dog dogs cat cats puppy kitten rabbit hamster"),
    ("ppe protective safety?", "goggles gloves coat? coats? mask masks"),
    ("dna genetic", "plasmid plasmids rna genome primers"),
    ("exercise exercises workout sport", "gym climbing running cycling swimming yoga squats physio"),
)

# Words that read the same in many senses confirm the sense of a marked word when the
# query has both: "hours" confirms "deadline" as a date.
SENSES: Final[tuple[str, ...]] = (
    "date dates day days deadline deadlines schedule month months week weeks weekday weekdays "
    "weekend time times hour hours clock morning afternoon evening night noon midnight today "
    "tomorrow tonight yesterday daily weekly monthly yearly annual annually calendar due",
    "person people team teams colleague colleagues who whom whose staff boss manager contact",
    "leave holiday holidays vacation pto days annual sick parental maternity paternity "
    "allowance entitlement remaining",
    "long short brief concise terse verbose detailed length reply replies respond response "
    "responses answer answers message messages summary summaries",
)
# A marked word right after one of these is what the question asks for ("which day?",
# "how many people?").
_ASKING: Final = frozenset({"what", "which", "whose", "many"})


def _forms(word: str) -> tuple[str, ...]:
    """The word and the forms the lists may hold it under: without a plural or verb ending
    ("dependencies" → "dependency", "installing" → "install", "deployed" → "deploy")."""
    if len(word) > 4 and word.endswith("ies"):
        return (word, word[:-3] + "y")
    if len(word) > 4 and word.endswith("es"):
        return (word, word[:-2], word[:-1])
    if len(word) > 3 and word.endswith("s"):
        return (word, word[:-1])
    if len(word) > 5 and word.endswith("ing"):
        return (word, word[:-3], word[:-3] + "e")
    if len(word) > 4 and word.endswith("ed"):
        return (word, word[:-2], word[:-1])
    return (word,)


class _Group(NamedTuple):
    """One list line: the words it holds, and which of them bring which."""

    words: frozenset[str]
    marked: frozenset[str]


def _split(line: str) -> tuple[list[str], set[str]]:
    """A line's words, and those marked ``?`` (they bring the line only when confirmed)."""
    words = [w.rstrip("?") for w in line.split()]
    return words, {w.rstrip("?") for w in line.split() if w.endswith("?")}


def _index() -> tuple[list[_Group], dict[str, list[tuple[int, frozenset[str]]]]]:
    groups: list[_Group] = []
    adds: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for line in SAME + EVERYDAY_SAME:
        words, marked = _split(line)
        index = len(groups)
        groups.append(_Group(frozenset(words), frozenset(marked)))
        for word in words:
            adds.setdefault(word, []).append((index, frozenset(words) - {word}))
    for kind_line, members_line in KINDS + EVERYDAY_KINDS:
        (kind, kind_marked), (members, members_marked) = _split(kind_line), _split(members_line)
        index = len(groups)
        groups.append(_Group(frozenset(kind + members), frozenset(kind_marked | members_marked)))
        for word in kind:
            adds.setdefault(word, []).append((index, frozenset(kind + members) - {word}))
        for word in members:
            adds.setdefault(word, []).append((index, frozenset(kind) - {word}))
    return groups, adds


_GROUPS, _ADDS = _index()
_SENSES: Final = tuple(frozenset(line.split()) for line in SENSES)


def _confirmed(word: str, group: _Group, own: set[str], mine: set[str]) -> bool:
    """Whether another word of the query (one of ``own``, the query's forms, that is not
    among ``mine``, this word's forms) confirms a marked word's sense: a word of the same
    list, or of the same sense (``SENSES``)."""

    def other(form: str) -> bool:
        return form in own and form not in mine

    if any(other(form) for form in group.words):
        return True
    return any(word in sense and any(other(form) for form in sense) for sense in _SENSES)


def bridged_terms(words: Iterable[str]) -> list[str]:
    """The words the bridge adds to ``words`` (a query's lower-cased words, in order), none
    of them among ``words``, in a stable order, at most ``MAX_BRIDGED_TERMS``. A word marked
    ``?`` in a list brings that list only when the question asks for it ("which day")
    or another of its words confirms the sense (``_confirmed``)."""
    ordered = list(words)
    forms_at = [set(_forms(word)) for word in ordered]
    own = {form for forms in forms_at for form in forms}
    candidates: dict[str, set[str]] = {}
    for position, forms in enumerate(forms_at):
        asked = position > 0 and ordered[position - 1] in _ASKING
        for form in forms - ENGLISH_STOP_WORDS:
            for index, added in _ADDS.get(form, ()):
                group = _GROUPS[index]
                # The other words' forms are ``own`` less this word's: testing membership
                # keeps a long query linear (a set of them per word would be quadratic).
                if form in group.marked and not asked and not _confirmed(form, group, own, forms):
                    continue
                candidates.setdefault(form, set()).update(added)
    found: dict[str, None] = {}
    for form in sorted(candidates):
        for word in sorted(candidates[form]):
            if word not in own and word not in ENGLISH_STOP_WORDS:
                found.setdefault(word, None)
    return list(found)[:MAX_BRIDGED_TERMS]


def query_words(query: str) -> list[str]:
    """The lower-cased words of a query as the bridge reads them."""
    return _WORD.findall(query.lower())
