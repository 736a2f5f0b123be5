// document-model 6.2.2 is, at its top level, the document-model API of
// @powerhousedao/shared plus a logger. npm serves no 6.2.2 of it, so this
// stand-in re-exports the former and supplies the latter: the reactor
// imports ConsoleLogger and childLogger from it and nothing else. The
// logger writes warnings and errors to the console and drops the rest, so
// that logging costs the benchmark next to nothing.
export * from "@powerhousedao/shared/document-model";

const levels = ["verbose", "debug", "info", "warn", "error"];

export class ConsoleLogger {
  constructor(tags = [], level = process.env.REFERENCE_LOG_LEVEL || "warn") {
    this.tags = tags;
    this.level = level;
    this.errorHandler = undefined;
  }

  child(tags) {
    return new ConsoleLogger([...this.tags, ...tags], this.level);
  }

  #log(level, message, replacements) {
    if (levels.indexOf(level) < levels.indexOf(this.level)) return;
    const prefix = this.tags.length ? `[${this.tags.join("][")}] ` : "";
    (level === "error" ? console.error : console.warn)(`${prefix}${message}`, ...replacements);
    if (level === "error" && this.errorHandler) this.errorHandler(message, ...replacements);
  }

  verbose(message, ...r) { this.#log("verbose", message, r); }
  debug(message, ...r) { this.#log("debug", message, r); }
  info(message, ...r) { this.#log("info", message, r); }
  warn(message, ...r) { this.#log("warn", message, r); }
  error(message, ...r) { this.#log("error", message, r); }
}

export const logger = new ConsoleLogger();

export const childLogger = (tags) => logger.child(tags);
