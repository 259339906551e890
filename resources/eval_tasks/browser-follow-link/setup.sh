# Firefox wants its --profile folder to exist; an empty one is a fresh profile. These preferences keep its
# first-run pages (a privacy notice, a welcome tour: unreachable offline) from opening beside the task's page.
mkdir -p "$HOME/firefox"
cat > "$HOME/firefox/user.js" <<'PREFS'
user_pref("datareporting.policy.firstRunURL", "");
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.shell.checkDefaultBrowser", false);
PREFS
