"""The course config: one TOML file, every key declared once (`sections`).

The public names: `load_config`, `CourseConfig`, `with_values`, `replaced`,
`default_draws`, `Draw`, `default_value` and the allowed values below. The
package's modules, one concern each: `fields` (the kinds of value and their
complaints), `sections` (the declarations), `own` (an own question's
section), `variants` ([variants]), `course` (reading a course), `renamed`
(the names of earlier releases), `docs` (docs/config.md from the declarations).
"""
from shardlab.reference.config.course import (CourseConfig, default_value, load_config, own_question_dirs,
                                              replaced, with_values)
from shardlab.reference.config.sections import (GRADESCOPE_ID_FIELDS, QUESTION_SECTIONS, SCAFFOLDINGS,
                                                VISIBILITIES, WALL_REQUIREMENTS, GradescopeSection, Section)
from shardlab.reference.config.variants import Draw, default_draws


__all__ = ["CourseConfig", "Draw", "GRADESCOPE_ID_FIELDS", "GradescopeSection",
           "QUESTION_SECTIONS", "SCAFFOLDINGS", "Section", "VISIBILITIES", "WALL_REQUIREMENTS", "default_draws",
           "default_value", "load_config", "own_question_dirs", "replaced", "with_values"]
